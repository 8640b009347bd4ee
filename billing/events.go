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
// tx, the delivery's transaction (deduplicated by the idempotency
// middleware): a second path to the truth beside the reconciler. It reports
// whether the event changed anything.
func (s *Service) ApplyEvent(ctx context.Context, tx func() *gorm.DB, event payments.Event) (bool, error) {
	if event.Refund != nil {
		return s.refunds.applyEvent(ctx, tx, event.ID, event.ProviderKey, refundOutcome(*event.Refund))
	}
	return s.charges.applyEvent(ctx, tx, event.ID, event.ProviderKey, chargeOutcome(event.Charge))
}

// applyEvent settles the open request sent under providerKey with the
// event (apply). On an answered request only flow.late writes (money moved
// that the shop had recorded as not moved, for a person; a pending refund's
// end), so an out-of-order delivery never un-pays an order. While a live
// operation holds the order: models.ErrPaymentInProgress, nothing written,
// and the provider delivers the event again.
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
// under a hold of the delivery's own. On failure the hold lapses after one
// lease: let go from another connection while tx is open, it would wait
// for tx's write lock on SQLite.
func (f *flow[R, T]) apply(ctx context.Context, tx func() *gorm.DB, eventID string, row R, outcome Outcome) (bool, error) {
	holder := orders.NewHolder(byWebhook + ":" + eventID)
	now := f.s.now()
	row, held, err := HoldForResolution[R](ctx, f.s.shop, row.Base().ID, holder, now, now.Add(f.s.cfg.Lease))
	switch {
	case err != nil:
		return false, err
	case !held && row.Base().State.Open():
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

// asWebhook is tx, whose writes are audited as the webhook's doing.
func asWebhook(tx func() *gorm.DB) func() *gorm.DB {
	return func() *gorm.DB {
		db := tx()
		return db.WithContext(audit.WithActor(db.Statement.Context, audit.By(audit.ActorWebhook)))
	}
}
