package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// The reasons of refunds the provider never made.
const (
	reasonRefused  = "The payment provider refused the refund."
	reasonNoRecord = "The payment provider has no record of the refund: nothing was given back."
)

// Refund gives money back on one of the user's charged orders: the amount
// asked, or all that is still refundable. Like Pay, it records the refund
// in doubt under the order's hold before the provider is called, and
// resolves an earlier refund in doubt under its own key first, so that the
// order's refunds never add up to more than its charge. A refund the
// provider answered failed is a refund too (State failed).
func (s *Service) Refund(ctx context.Context, op Operation, userID, orderID string, in models.RefundInput) (models.Refund, error) {
	if refund, ok, err := s.shop.RefundOf(ctx, op.DerivedKey); err != nil || ok {
		return refund, err
	}
	holder := models.NewHolder(op.DerivedKey)
	op.OnLeaseExtended(func(ctx context.Context, until time.Time) error {
		return s.shop.ExtendHold(ctx, orderID, holder, until)
	})
	refund, answer, answered, err := s.beginRefund(ctx, op, userID, orderID, holder, in)
	if answered || err != nil {
		return answer, err
	}
	return s.sendRefund(ctx, op, refund, holder)
}

// beginRefund records the operation's refund under the order's hold, once
// no earlier refund of the order is in doubt: it resolves those first.
func (s *Service) beginRefund(ctx context.Context, op Operation, userID, orderID, holder string, in models.RefundInput) (models.Refund, models.Refund, bool, error) {
	for tries := 0; ; tries++ {
		now := s.now()
		start, err := s.shop.BeginRefund(ctx, userID, orderID, op.DerivedKey, holder, in, now, now.Add(s.cfg.Lease))
		switch {
		case err != nil:
			return models.Refund{}, models.Refund{}, false, err
		case !start.Unresolved:
			return start.Refund, models.Refund{}, false, nil
		case tries == maxResolutions:
			s.releaseHold(ctx, orderID, holder)
			return models.Refund{}, models.Refund{}, false, models.ErrPaymentInDoubt
		}
		earlier := start.Refund
		resolved := s.resolveRefund(ctx, byRefund, earlier, holder)
		own := earlier.DerivedKey == op.DerivedKey
		switch {
		case resolved.State == models.RefundInDoubt:
			s.releaseHold(ctx, orderID, holder)
			if own {
				return models.Refund{}, models.Refund{}, false, ErrRefundUnconfirmed
			}
			return models.Refund{}, models.Refund{}, false, ErrEarlierRefundUnconfirmed
		case own && resolved.State != models.RefundFailed:
			return models.Refund{}, resolved, true, nil // this operation's own answer, from a run that died
		}
		// Resolved (the operation's own, failed, is tried again under a new
		// provider key): what is still refundable is known again.
	}
}

// sendRefund sends the refund to the provider and records its answer
// through the operation's transaction.
func (s *Service) sendRefund(ctx context.Context, op Operation, refund models.Refund, holder string) (models.Refund, error) {
	answer, err := s.cfg.Provider.Refund(ctx, refundRequest(refund))
	s.metrics.provider.WithLabelValues("refund_" + refundResult(answer, err)).Inc()
	switch {
	case errors.Is(err, payments.ErrRefused):
		// The refund itself is refused, and always will be: a final answer.
		answer, err = payments.RefundAnswer{State: models.RefundFailed, FailureReason: reasonRefused}, nil
	case errors.Is(err, payments.ErrUnavailable):
		// Turned away for now, nothing given back under the refund's key:
		// settled failed at once, and a retry asks under a new one.
		failed := models.RefundOutcome{State: models.RefundFailed, FailureReason: reasonRefused}
		if settleErr := s.inTx(ctx, func(tx *gorm.DB) error { _, e := s.shop.SettleRefund(tx, refund, failed, holder); return e }); settleErr != nil {
			s.cfg.Logger.Error("record a refused refund", "err", settleErr, "refund", refund.ID)
		}
		return models.Refund{}, ErrRefundUnavailable
	}
	if err != nil {
		s.cfg.Logger.Warn("payment provider failed a refund", "err", err, "refund", refund.ID)
		s.releaseHold(ctx, refund.OrderID, holder)
		return models.Refund{}, ErrRefundUnconfirmed
	}
	settled, err := s.shop.SettleRefund(op.Tx(), refund, refundOutcomeOf(answer), holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		if done, ok, readErr := s.shop.RefundOf(ctx, op.DerivedKey); readErr == nil && ok {
			return done, nil
		}
	}
	return settled, err
}

// resolveRefund finds out what became of a refund in doubt, as resolve
// does for a payment attempt, and records it under holder's hold. It
// returns the refund as it now stands (still in doubt when the provider
// could not say).
func (s *Service) resolveRefund(ctx context.Context, by string, refund models.Refund, holder string) models.Refund {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
	defer cancel()
	answer, err := s.askRefund(ctx, refund)
	s.metrics.provider.WithLabelValues("refund_" + refundResult(answer, err)).Inc()
	outcome := refundOutcomeOf(answer)
	switch {
	case errors.Is(err, payments.ErrRefused):
		outcome = models.RefundOutcome{State: models.RefundFailed, FailureReason: reasonRefused}
	case errors.Is(err, errNothingCharged):
		outcome = models.RefundOutcome{State: models.RefundFailed, FailureReason: reasonNoRecord}
	case err != nil:
		s.metrics.resolutions.WithLabelValues(by, "unresolved").Inc()
		s.cfg.Logger.Warn("refund still in doubt: the provider could not say what became of it", "refund", refund.ID, "by", by, "err", err)
		return refund
	}
	settled := refund
	err = s.inTx(ctx, func(tx *gorm.DB) error {
		var settleErr error
		settled, settleErr = s.shop.SettleRefund(tx, refund, outcome, holder)
		return settleErr
	})
	if err != nil {
		// Recorded meanwhile by a run that got the same answer, or not at all.
		if now, found, readErr := s.shop.RefundByKey(ctx, refund.ProviderKey); readErr == nil && found {
			return now
		}
		return refund
	}
	s.metrics.resolutions.WithLabelValues(by, "refund_"+string(settled.State)).Inc()
	s.cfg.Logger.Info("refund in doubt resolved with the provider", "refund", refund.ID, "by", by, "outcome", settled.State)
	return settled
}

// askRefund sends the refund's request again within the roll-forward
// window, and only looks it up past it, as ask does for a charge.
func (s *Service) askRefund(ctx context.Context, refund models.Refund) (payments.RefundAnswer, error) {
	req := refundRequest(refund)
	if s.now().Sub(refund.CreatedAt) < min(s.cfg.RollForward, s.cfg.Provider.KeyLifetime()) {
		if err := s.shop.MarkRefundSent(ctx, refund.ID, s.now()); err != nil {
			return payments.RefundAnswer{}, err
		}
		return s.cfg.Provider.Refund(ctx, req)
	}
	answer, found, err := s.cfg.Provider.FindRefund(ctx, req)
	if err == nil && !found {
		err = s.nothingFound(refund.LastSent())
	}
	return answer, err
}

func refundRequest(r models.Refund) payments.RefundRequest {
	return payments.RefundRequest{IdempotencyKey: r.ProviderKey, ChargeID: r.ChargeID, OrderID: r.OrderID, AmountCents: r.AmountCents, Currency: r.Currency}
}

func refundOutcomeOf(a payments.RefundAnswer) models.RefundOutcome {
	return models.RefundOutcome{State: a.State, ProviderRefundID: a.ID, FailureReason: a.FailureReason}
}

func refundResult(answer payments.RefundAnswer, err error) string {
	if err != nil {
		return providerResult(payments.Charge{}, err)
	}
	return string(answer.State)
}

// Cancel cancels one of the user's pending orders through tx: only while
// nothing can have been charged — no payment running, none in doubt.
func (s *Service) Cancel(tx *gorm.DB, userID, orderID string) (models.Order, error) {
	return s.shop.CancelOrder(tx, userID, orderID, s.now())
}
