package billing

import (
	"context"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
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
	attempt, found, err := s.shop.AttemptByKey(ctx, event.ProviderKey)
	if err != nil || !found {
		return false, err // not one of ours
	}
	holder := models.NewHolder(byWebhook + ":" + event.ID)
	now := s.now()
	if event.Charge.Status == models.PaymentSucceeded && (attempt.State == models.AttemptFailed || attempt.State == models.AttemptDeclined) {
		return true, s.recordLateCharge(tx(), event, attempt, holder)
	}
	if attempt.State != models.AttemptInDoubt {
		return false, nil // its outcome is already recorded
	}
	attempt, held, err := s.shop.HoldForResolution(ctx, attempt.ID, holder, now, now.Add(s.cfg.Lease))
	switch {
	case err != nil:
		return false, err
	case !held && attempt.State == models.AttemptInDoubt:
		// A live operation holds the order and will record the outcome;
		// if it does not, the provider delivers the event again.
		return false, models.ErrPaymentInProgress
	case !held:
		return false, nil
	}
	// On failure the hold is not let go from another connection while tx
	// is open (on SQLite it would wait for tx's write lock): it lapses
	// after one lease.
	payment, err := s.shop.Settle(tx(), attempt, outcomeOf(event.Charge), holder)
	if err != nil {
		return false, err
	}
	s.metrics.resolutions.WithLabelValues(byWebhook, string(payment.Status)).Inc()
	s.cfg.Logger.Info("payment attempt in doubt resolved by a provider event", "attempt", attempt.ID, "order", attempt.OrderID, "event", event.ID, "outcome", payment.Status)
	return true, nil
}

// recordLateCharge records a charge the provider reports for an attempt the
// shop had recorded as refused or declined. It should never happen; if it
// does, the charge is recorded all the same, and logged and counted for a
// person to refund if the order was paid twice.
func (s *Service) recordLateCharge(tx *gorm.DB, event payments.Event, attempt models.PaymentAttempt, holder string) error {
	if _, err := s.shop.RecordLateCharge(tx, attempt, outcomeOf(event.Charge), holder, s.now()); err != nil {
		return err
	}
	s.metrics.resolutions.WithLabelValues(byWebhook, "late_charge").Inc()
	s.cfg.Logger.Error("the provider charged a payment attempt the shop had recorded as "+string(attempt.State)+"; recorded now — refund it if the order was paid twice",
		"attempt", attempt.ID, "order", attempt.OrderID, "event", event.ID, "charge", event.Charge.ID)
	return nil
}

// ApplyRefundEvent applies a provider's event about a refund through tx,
// the delivery's transaction: a refund in doubt is settled with the event's
// answer, under the order's hold (models.ErrPaymentInProgress while a live
// operation holds it); a pending one moves to its final state; one recorded
// failed that the provider made after all is recorded (a late refund).
// Anything else changes nothing.
func (s *Service) ApplyRefundEvent(ctx context.Context, tx func() *gorm.DB, event payments.RefundEvent) (bool, error) {
	refund, found, err := s.shop.RefundByKey(ctx, event.ProviderKey)
	if err != nil || !found {
		return false, err
	}
	outcome := refundOutcomeOf(event.Refund)
	switch {
	case refund.State == models.RefundPending && outcome.State != models.RefundPending:
		return s.shop.UpdateRefundState(tx(), refund, outcome)
	case refund.State == models.RefundFailed && outcome.State == models.RefundSucceeded:
		return s.recordLateRefund(tx(), event, refund, outcome)
	case refund.State != models.RefundInDoubt:
		return false, nil
	}
	holder := models.NewHolder(byWebhook + ":" + event.ID)
	now := s.now()
	refund, held, err := s.shop.HoldRefundForResolution(ctx, refund.ID, holder, now, now.Add(s.cfg.Lease))
	switch {
	case err != nil:
		return false, err
	case !held && refund.State == models.RefundInDoubt:
		return false, models.ErrPaymentInProgress
	case !held:
		return false, nil
	}
	if _, err := s.shop.SettleRefund(tx(), refund, outcome, holder); err != nil {
		return false, err
	}
	s.metrics.resolutions.WithLabelValues(byWebhook, "refund_"+string(outcome.State)).Inc()
	return true, nil
}

// recordLateRefund records a refund the provider reports succeeded although
// the shop had recorded it failed: the money went back, so the order says
// so; logged and counted for a person to look at.
func (s *Service) recordLateRefund(tx *gorm.DB, event payments.RefundEvent, refund models.Refund, outcome models.RefundOutcome) (bool, error) {
	applied, err := s.shop.RecordLateRefund(tx, refund, outcome)
	if err != nil || !applied {
		return applied, err
	}
	s.metrics.resolutions.WithLabelValues(byWebhook, "late_refund").Inc()
	s.cfg.Logger.Error("the provider made a refund the shop had recorded as failed; recorded now",
		"refund", refund.ID, "order", refund.OrderID, "event", event.ID, "provider_refund", event.Refund.ID)
	return true, nil
}
