package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Operation is the idempotent operation a payment runs in, as the
// idempotency middleware hands it to its handler.
type Operation struct {
	// DerivedKey names the operation to the provider and on its rows.
	DerivedKey string
	// Tx is the operation's transaction, begun on first use: the outcome
	// is written through it and committed with the stored answer.
	Tx func() *gorm.DB
	// OnLeaseExtended has fn run each time the operation's lease is
	// extended, so that the order's hold lasts as long as the operation.
	OnLeaseExtended func(fn func(ctx context.Context, until time.Time) error)
}

// maxResolutions bounds how many earlier attempts one payment resolves
// before it gives up; there is at most one in doubt at a time.
const maxResolutions = 3

// Pay charges one of the user's orders with method and records the
// payment: the API's and the pay form's one way to take money. A declined
// card is a payment too (Status declined).
func (s *Service) Pay(ctx context.Context, op Operation, userID, orderID, method string) (models.Payment, error) {
	// A run of this operation that died may have been settled since, by
	// another operation or the reconciler: that payment is its answer.
	if payment, ok, err := s.shop.PaymentOf(ctx, op.DerivedKey); err != nil || ok {
		return payment, err
	}
	// This run holds the order, not the operation: a run that outlived its
	// lease cannot write over the run that took over.
	holder := models.NewHolder(op.DerivedKey)
	op.OnLeaseExtended(func(ctx context.Context, until time.Time) error {
		return s.shop.ExtendHold(ctx, orderID, holder, until)
	})
	attempt, payment, answered, err := s.begin(ctx, op, userID, orderID, holder, method)
	if answered || err != nil {
		return payment, err
	}
	return s.charge(ctx, op, attempt, holder)
}

// begin records the operation's attempt under the order's hold, once no
// earlier attempt of the order is in doubt: it resolves those first. When
// answered, the operation's answer is known without a charge.
func (s *Service) begin(ctx context.Context, op Operation, userID, orderID, holder, method string) (models.PaymentAttempt, models.Payment, bool, error) {
	for tries := 0; ; tries++ {
		now := s.now()
		start, err := s.shop.BeginPayment(ctx, userID, orderID, op.DerivedKey, holder, method, now, now.Add(s.cfg.Lease))
		if errors.Is(err, models.ErrOrderPaid) {
			// Paid meanwhile — perhaps by this operation's own charge,
			// settled by the reconciler since the look in Pay.
			if payment, ok, readErr := s.shop.PaymentOf(ctx, op.DerivedKey); readErr != nil || ok {
				return models.PaymentAttempt{}, payment, true, readErr
			}
		}
		switch {
		case err != nil:
			return models.PaymentAttempt{}, models.Payment{}, false, err
		case !start.Unresolved:
			return start.Attempt, models.Payment{}, false, nil
		case tries == maxResolutions:
			s.releaseHold(ctx, orderID, holder)
			return models.PaymentAttempt{}, models.Payment{}, false, models.ErrPaymentInDoubt
		}
		// An earlier attempt is in doubt: nothing may be charged before
		// the provider says what became of it.
		earlier := start.Attempt
		own := earlier.DerivedKey == op.DerivedKey
		r := s.resolve(ctx, byPayment, earlier, holder)
		switch {
		case r.state == models.AttemptInDoubt && own:
			s.releaseHold(ctx, orderID, holder)
			return models.PaymentAttempt{}, models.Payment{}, false, ErrUnconfirmed
		case r.state == models.AttemptInDoubt:
			s.releaseHold(ctx, orderID, holder)
			return models.PaymentAttempt{}, models.Payment{}, false, ErrEarlierUnconfirmed
		case own && r.state != models.AttemptFailed:
			return models.PaymentAttempt{}, r.payment, true, nil // this operation's own answer, from a run that died
		case r.state == models.AttemptSucceeded:
			return models.PaymentAttempt{}, models.Payment{}, false, models.ErrOrderPaid
		}
		// Declined, or nothing charged: the order is free to charge.
	}
}

// charge sends the attempt to the provider and records its answer.
func (s *Service) charge(ctx context.Context, op Operation, attempt models.PaymentAttempt, holder string) (models.Payment, error) {
	charge, err := s.cfg.Provider.Charge(ctx, chargeRequest(attempt))
	s.metrics.provider.WithLabelValues(providerResult(charge, err)).Inc()
	if nothingCharged(err) {
		// The provider says nothing was charged under the attempt's key:
		// other keys may try at once.
		if err := s.inTx(ctx, func(tx *gorm.DB) error { return s.shop.FailAttempt(tx, attempt, holder) }); err != nil {
			s.cfg.Logger.Error("record a refused payment attempt", "err", err, "attempt", attempt.ID)
		}
		return models.Payment{}, ErrProviderUnavailable
	}
	if err != nil {
		// No answer: the charge may have gone through. The attempt stays in
		// doubt, so no other key can charge the order before the provider
		// is asked again under this attempt's key: by a retry, another
		// payment of the order, or the reconciler. The hold is let go so
		// that they can do so at once.
		s.cfg.Logger.Warn("payment provider failed", "err", err, "attempt", attempt.ID)
		s.releaseHold(ctx, attempt.OrderID, holder)
		return models.Payment{}, ErrUnconfirmed
	}
	payment, err := s.shop.Settle(op.Tx(), attempt, outcomeOf(charge), holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// The hold passed while the provider answered: the operation that
		// took it resolved this attempt, with the provider's same answer.
		if settled, ok, readErr := s.shop.PaymentOf(ctx, op.DerivedKey); readErr == nil && ok {
			return settled, nil
		}
	}
	return payment, err
}

// nothingCharged reports whether err is the provider's word, on the first
// request under a key, that nothing was charged under it.
func nothingCharged(err error) bool {
	return errors.Is(err, payments.ErrUnavailable) || errors.Is(err, payments.ErrRefused)
}

func providerResult(charge payments.Charge, err error) string {
	switch {
	case errors.Is(err, payments.ErrRefused):
		return "refused"
	case errors.Is(err, payments.ErrUnavailable):
		return "unavailable"
	case err != nil:
		return "error"
	}
	return string(charge.Status)
}
