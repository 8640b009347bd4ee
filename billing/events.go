package billing

import (
	"context"

	"gorm.io/gorm"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// ApplyEvent applies a provider's event about a charge or a refund through
// tx, the transaction of the event's delivery, which the idempotency
// middleware deduplicates: a second path to the truth of a request in
// doubt, beside the reconciler. It reports whether the event changed
// anything.
func (s *Service) ApplyEvent(ctx context.Context, tx func() *gorm.DB, event payments.Event) (bool, error) {
	if event.Refund != nil {
		return s.refunds.applyEvent(ctx, tx, event.ID, event.ProviderKey, refundOutcome(*event.Refund))
	}
	return s.charges.applyEvent(ctx, tx, event.ID, event.ProviderKey, chargeOutcome(event.Charge))
}

// applyEvent applies the provider's word on the request sent under
// providerKey: a request in doubt is settled with it (apply). An event about
// a request already answered changes nothing, so a late or out-of-order
// delivery (failed after succeeded) never un-pays an order — except the
// provider's later word that the use records (flow.late): money moved that
// the shop had recorded as not moved, logged and counted for a person; or a
// pending refund's end. An event about a request a live operation holds
// gets models.ErrPaymentInProgress, writes nothing, and is applied when the
// provider delivers it again.
func (f *flow[R, T]) applyEvent(ctx context.Context, tx func() *gorm.DB, eventID, providerKey string, outcome Outcome) (bool, error) {
	tx = asWebhook(tx)
	row, found, err := ByKey[R](ctx, f.s.shop, providerKey)
	if err != nil || !found {
		return false, err // not one of ours
	}
	if row.Base().State.Open() {
		return f.apply(ctx, tx, eventID, row, outcome)
	}
	late, err := f.late(tx(), row, outcome, orders.NewHolder(byWebhook+":"+eventID), f.s.now())
	if err != nil || late.Label == "" {
		return late.Moved, err
	}
	f.s.metrics.resolutions.WithLabelValues(byWebhook, late.Label).Inc()
	f.s.cfg.Logger.ErrorContext(ctx, late.Warning, f.what, row.Base().ID, "order", row.Base().OrderID, "event", eventID, "provider_id", outcome.ProviderID)
	return true, nil
}

// apply settles a request in doubt with an event's outcome through tx,
// under a hold of the delivery's own. On failure the hold is not let go
// from another connection while tx is open (on SQLite it would wait for
// tx's write lock): it lapses after one lease.
func (f *flow[R, T]) apply(ctx context.Context, tx func() *gorm.DB, eventID string, row R, outcome Outcome) (bool, error) {
	holder := orders.NewHolder(byWebhook + ":" + eventID)
	now := f.s.now()
	row, held, err := HoldForResolution[R](ctx, f.s.shop, row.Base().ID, holder, now, now.Add(f.s.cfg.Lease))
	switch {
	case err != nil:
		return false, err
	case !held && row.Base().State.Open():
		// A live operation holds the order and will record the outcome;
		// if it does not, the provider delivers the event again.
		return false, models.ErrPaymentInProgress
	case !held:
		return false, nil
	}
	if _, err := f.settle(tx(), row, outcome, holder); err != nil {
		return false, err
	}
	f.s.metrics.resolutions.WithLabelValues(byWebhook, f.label(outcome.State)).Inc()
	f.s.cfg.Logger.InfoContext(ctx, f.noun+" in doubt resolved by a provider event", f.what, row.Base().ID, "order", row.Base().OrderID, "event", eventID, "outcome", outcome.State)
	return true, nil
}

// asWebhook is tx, the delivery's transaction, recording what it writes as
// the provider's webhook's doing (audit.Audit).
func asWebhook(tx func() *gorm.DB) func() *gorm.DB {
	return func() *gorm.DB {
		db := tx()
		return db.WithContext(audit.WithActor(db.Statement.Context, audit.By(audit.ActorWebhook)))
	}
}
