package billing

import (
	"context"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Pay charges one of the user's orders with method and records the
// payment: the API's and the pay form's one way to take money. A declined
// card is a payment too (Status declined).
func (s *Service) Pay(ctx context.Context, op Operation, userID, orderID, method string) (models.Payment, error) {
	return s.charges.run(ctx, op, orderID, func(ctx context.Context, holder string, now, until time.Time) (Begun[models.PaymentAttempt], error) {
		return s.shop.BeginPayment(ctx, userID, orderID, op.DerivedKey, holder, method, now, until)
	})
}

// chargeFlow is the protocol's use for charges: an attempt's row, and the
// payment it makes.
func (s *Service) chargeFlow() flow[models.PaymentAttempt, models.Payment] {
	return flow[models.PaymentAttempt, models.Payment]{
		s: s, by: byPayment, what: "attempt", noun: "payment attempt",
		answerOf: s.shop.PaymentOf,
		send: func(ctx context.Context, a models.PaymentAttempt) (Outcome, error) {
			charge, err := s.cfg.Provider.Charge(ctx, s.chargeRequest(a))
			return s.awaiting(ctx, a, chargeOutcome(charge)), err
		},
		find: func(ctx context.Context, a models.PaymentAttempt) (Outcome, bool, error) {
			charge, found, err := s.cfg.Provider.Find(ctx, s.chargeRequest(a))
			return s.awaiting(ctx, a, chargeOutcome(charge)), found, err
		},
		settle: s.shop.Settle, late: s.shop.settleLateCharge,
		errs: flowErrors{
			unconfirmed: ErrUnconfirmed, earlierUnconfirmed: ErrEarlierUnconfirmed,
			unavailable: ErrProviderUnavailable, inDoubt: models.ErrPaymentInDoubt,
		},
	}
}

func (s *Service) chargeRequest(a models.PaymentAttempt) payments.ChargeRequest {
	return payments.ChargeRequest{
		IdempotencyKey: a.ProviderKey, OrderID: a.OrderID, AmountCents: a.AmountCents, Currency: a.Currency, PaymentMethod: a.PaymentMethod,
		ReturnURL: s.cfg.ReturnURL(a.OrderID), ChargeID: a.ProviderChargeID,
	}
}

func chargeOutcome(charge payments.Charge) Outcome {
	return Outcome{State: charge.Status, ProviderID: charge.ID, Reason: charge.DeclineReason, NextActionURL: charge.NextActionURL}
}
