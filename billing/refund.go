package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Refund gives money back on a charged order, any user's, by the staff user
// by (models.ErrForbidden for anyone else): the amount
// asked, or all that is still refundable. Like Pay, it records the refund
// in doubt under the order's hold before the provider is called, and
// resolves an earlier refund in doubt under its own key first, so that the
// order's refunds never add up to more than its charge. A refund the
// provider answered failed is a refund too (State failed).
func (s *Service) Refund(ctx context.Context, op Operation, by models.User, orderID string, in RefundInput) (models.Refund, error) {
	return s.refunds.run(ctx, op, orderID, func(ctx context.Context, holder string, now, until time.Time) (Begun[models.Refund], error) {
		return s.shop.BeginRefund(ctx, by, orderID, op.DerivedKey, holder, in, now, until)
	})
}

// refundFlow is the protocol's use for refunds: the refund's row is its
// answer, and the provider's refusal of a refund is final.
func (s *Service) refundFlow() flow[models.Refund, models.Refund] {
	return flow[models.Refund, models.Refund]{
		s: s, by: byRefund, prefix: "refund_", what: "refund", noun: "refund",
		answerOf: s.shop.RefundOf,
		send: func(ctx context.Context, r models.Refund) (Outcome, error) {
			answer, err := s.cfg.Provider.Refund(ctx, refundRequest(r))
			return refundOutcome(answer), err
		},
		find: func(ctx context.Context, r models.Refund) (Outcome, bool, error) {
			answer, found, err := s.cfg.Provider.FindRefund(ctx, refundRequest(r))
			return refundOutcome(answer), found, err
		},
		settle:         s.shop.SettleRefund,
		late:           s.shop.settleLateRefund,
		refusalAnswers: true,
		reasons: reasons{
			refused:     "The payment provider refused the refund.",
			unavailable: "The payment provider was unavailable: nothing was given back.",
			noRecord:    "The payment provider has no record of the refund: nothing was given back.",
		},
		errs: flowErrors{
			unconfirmed: ErrRefundUnconfirmed, earlierUnconfirmed: ErrEarlierRefundUnconfirmed,
			unavailable: ErrRefundUnavailable, inDoubt: models.ErrRefundInDoubt,
		},
	}
}

func refundRequest(r models.Refund) payments.RefundRequest {
	return payments.RefundRequest{IdempotencyKey: r.ProviderKey, ChargeID: r.ChargeID, OrderID: r.OrderID, AmountCents: r.AmountCents, Currency: r.Currency}
}

func refundOutcome(a payments.RefundAnswer) Outcome {
	return Outcome{State: a.State, ProviderID: a.ID, Reason: a.FailureReason}
}

// Cancel cancels one of the user's pending orders through tx: only while
// nothing can have been charged — no payment running, none in doubt. A paid
// order is not cancellable: it is refunded instead.
func (s *Service) Cancel(tx *gorm.DB, userID, orderID string) (models.Order, error) {
	return paidNotCancellable(s.orders.CancelOrder(tx, userID, orderID, s.now()))
}

// CancelAny is Cancel of any user's pending order, by the staff user by.
func (s *Service) CancelAny(tx *gorm.DB, by models.User, orderID string) (models.Order, error) {
	return paidNotCancellable(s.orders.CancelAnyOrder(tx, by, orderID, s.now()))
}

// paidNotCancellable tells a paid order's refusal as the cancel's own.
func paidNotCancellable(order models.Order, err error) (models.Order, error) {
	if errors.Is(err, models.ErrOrderPaid) {
		err = models.ErrPaidNotCancellable
	}
	return order, err
}
