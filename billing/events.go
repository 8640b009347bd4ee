package billing

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// ApplyEvent applies a provider's event about a charge through tx, the
// transaction of the event's delivery, which the idempotency middleware
// deduplicates: a second path to the truth of an attempt in doubt, beside
// the reconciler. It reports whether the event changed anything. An event
// about an attempt already resolved changes nothing, so a late or
// out-of-order delivery (failed after succeeded) never un-pays an order —
// except a charge reported for an attempt recorded as refused or declined,
// which is recorded all the same (a late charge). An event about an attempt
// a live operation holds gets models.ErrPaymentInProgress, writes nothing,
// and is applied when the provider delivers it again.
func (s *Service) ApplyEvent(ctx context.Context, tx func() *gorm.DB, event payments.Event) (bool, error) {
	tx = asWebhook(tx)
	attempt, found, err := ByKey[models.PaymentAttempt](ctx, s.shop, event.ProviderKey)
	if err != nil || !found {
		return false, err // not one of ours
	}
	outcome := chargeOutcome(event.Charge)
	if outcome.State == models.Succeeded && (attempt.State == models.Failed || attempt.State == models.Declined) {
		return true, s.recordLateCharge(tx(), event, attempt, outcome)
	}
	return s.charges.apply(ctx, tx, event.ID, attempt, outcome)
}

// recordLateCharge records a charge the provider reports for an attempt the
// shop had recorded as refused or declined. It should never happen; if it
// does, the charge is recorded all the same, and logged and counted for a
// person to refund if the order was paid twice.
func (s *Service) recordLateCharge(tx *gorm.DB, event payments.Event, attempt models.PaymentAttempt, outcome Outcome) error {
	holder := orders.NewHolder(byWebhook + ":" + event.ID)
	what := "refund it if the order was paid twice"
	_, err := s.shop.RecordLateCharge(tx, attempt, outcome, holder, s.now())
	switch {
	case errors.Is(err, ErrChargedCancelled):
		what = "the order was cancelled, and stays so: refund the charge"
	case err != nil:
		return err
	}
	s.metrics.resolutions.WithLabelValues(byWebhook, "late_charge").Inc()
	s.cfg.Logger.ErrorContext(tx.Statement.Context, "the provider charged a payment attempt the shop had recorded as "+string(attempt.State)+"; recorded now — "+what,
		"attempt", attempt.ID, "order", attempt.OrderID, "event", event.ID, "charge", event.Charge.ID)
	return nil
}

// ApplyRefundEvent applies a provider's event about a refund through tx,
// the delivery's transaction: a refund in doubt is settled with the event's
// answer, as ApplyEvent settles an attempt; a pending one moves to its final
// state; one recorded failed that the provider made after all is recorded
// (a late refund). Anything else changes nothing.
func (s *Service) ApplyRefundEvent(ctx context.Context, tx func() *gorm.DB, event payments.RefundEvent) (bool, error) {
	tx = asWebhook(tx)
	refund, found, err := ByKey[models.Refund](ctx, s.shop, event.ProviderKey)
	if err != nil || !found {
		return false, err
	}
	outcome := refundOutcome(event.Refund)
	switch {
	case refund.State == models.Pending && outcome.State != models.Pending:
		return s.shop.UpdateRefundState(tx(), refund, outcome)
	case refund.State == models.Failed && outcome.State == models.Succeeded:
		return s.recordLateRefund(tx(), event, refund, outcome)
	}
	return s.refunds.apply(ctx, tx, event.ID, refund, outcome)
}

// recordLateRefund records a refund the provider reports succeeded although
// the shop had recorded it failed: the money went back, so the order says
// so — or, if its charge was given back in full already, the refund is
// recorded as excess, for staff to recover. Logged and counted either way.
func (s *Service) recordLateRefund(tx *gorm.DB, event payments.RefundEvent, refund models.Refund, outcome Outcome) (bool, error) {
	state, err := s.shop.RecordLateRefund(tx, refund, outcome)
	if err != nil || state == "" {
		return false, err
	}
	log := s.cfg.Logger.With("refund", refund.ID, "order", refund.OrderID, "event", event.ID, "provider_refund", event.Refund.ID)
	if state == models.Excess {
		s.metrics.resolutions.WithLabelValues(byWebhook, "late_refund_excess").Inc()
		log.ErrorContext(tx.Statement.Context, "the provider made a refund the shop had recorded as failed, of a charge already given back in full: money given back twice; recorded as excess, for staff to recover")
		return true, nil
	}
	s.metrics.resolutions.WithLabelValues(byWebhook, "late_refund").Inc()
	log.ErrorContext(tx.Statement.Context, "the provider made a refund the shop had recorded as failed; recorded now")
	return true, nil
}

// apply settles a request in doubt with an event's outcome through tx,
// under a hold of the delivery's own. On failure the hold is not let go
// from another connection while tx is open (on SQLite it would wait for
// tx's write lock): it lapses after one lease.
func (f *flow[R, T]) apply(ctx context.Context, tx func() *gorm.DB, eventID string, row R, outcome Outcome) (bool, error) {
	if !row.Base().State.Open() {
		return false, nil // its outcome is already recorded
	}
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
// the provider's webhook's doing (models.Audit).
func asWebhook(tx func() *gorm.DB) func() *gorm.DB {
	return func() *gorm.DB {
		db := tx()
		return db.WithContext(audit.WithActor(db.Statement.Context, audit.By(audit.ActorWebhook)))
	}
}
