package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Who resolves an attempt in doubt, as logs and metrics name them.
const (
	byPayment    = "payment"
	byReconciler = "reconciler"
	byWebhook    = "webhook"
	byRefund     = "refund"
)

// resolution is what became of an attempt in doubt: its state now
// (AttemptInDoubt when the provider could not say), and its payment when
// the provider gave an outcome.
type resolution struct {
	state   models.AttemptState
	payment models.Payment
}

// outcome names the resolution in logs and metrics: the attempt's state,
// or "unresolved".
func (r resolution) outcome() string {
	if r.state == models.AttemptInDoubt {
		return "unresolved"
	}
	return string(r.state)
}

// errNothingCharged: an attempt past the roll-forward window of which the
// provider has no record.
var errNothingCharged = errors.New("the payment provider has no record of the attempt's key")

// resolve finds out what became of an attempt in doubt, and records it
// under holder's hold of its order. Only the provider's word on the
// attempt's own key resolves it: an outcome, or a definitive refusal
// (payments.ErrRefused), which proves nothing was charged; a passing
// refusal of this request says nothing about the first.
func (s *Service) resolve(ctx context.Context, by string, attempt models.PaymentAttempt, holder string) resolution {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
	defer cancel()
	charge, err := s.ask(ctx, attempt)
	s.metrics.provider.WithLabelValues(providerResult(charge, err)).Inc()
	r, err := s.record(ctx, attempt, charge, err, holder)
	s.metrics.resolutions.WithLabelValues(by, r.outcome()).Inc()
	log := s.cfg.Logger.With("attempt", attempt.ID, "order", attempt.OrderID, "by", by, "outcome", r.outcome())
	if r.state == models.AttemptInDoubt {
		log.Warn("payment attempt still in doubt: the provider could not say what became of it", "err", err)
	} else {
		log.Info("payment attempt in doubt resolved with the provider", "charge", r.payment.ProviderChargeID)
	}
	return r
}

// ask sends the attempt's request again while it is younger than the
// roll-forward window and the provider's memory of keys: the provider
// answers a repeat with the first request's outcome, or makes the charge
// once if the first never arrived. An older attempt is only looked up, so
// that nothing is charged long after the shopper gave up.
func (s *Service) ask(ctx context.Context, attempt models.PaymentAttempt) (payments.Charge, error) {
	req := chargeRequest(attempt)
	if s.now().Sub(attempt.CreatedAt) < min(s.cfg.RollForward, s.cfg.Provider.KeyLifetime()) {
		if err := s.shop.MarkSent(ctx, attempt.ID, s.now()); err != nil {
			return payments.Charge{}, err
		}
		return s.cfg.Provider.Charge(ctx, req)
	}
	charge, found, err := s.cfg.Provider.Find(ctx, req)
	if err == nil && !found {
		err = s.nothingFound(attempt.LastSent())
	}
	return charge, err
}

// searchLag is how long a provider's search may take to show what a request
// did (Stripe's PaymentIntent search: "under a minute", more in an outage).
const searchLag = 5 * time.Minute

// errNotYetKnown: a lookup found nothing, but a request under the key may
// still be running, or too recent for the provider's search to show.
var errNotYetKnown = errors.New("the payment provider shows nothing under the key yet")

// nothingFound is what a lookup that found nothing proves: nothing was
// charged (errNothingCharged) only once every request sent under the key
// has ended, its last one sent at lastSent, and the search has caught up.
func (s *Service) nothingFound(lastSent time.Time) error {
	if s.now().Sub(lastSent) < s.cfg.AttemptTimeout+s.cfg.Lease+searchLag {
		return errNotYetKnown
	}
	return errNothingCharged
}

// record writes what the provider said of the attempt, under holder's hold.
func (s *Service) record(ctx context.Context, attempt models.PaymentAttempt, charge payments.Charge, asked error, holder string) (resolution, error) {
	var r resolution
	var err error
	switch {
	case errors.Is(asked, payments.ErrRefused), errors.Is(asked, errNothingCharged):
		err = s.inTx(ctx, func(tx *gorm.DB) error { return s.shop.FailAttempt(tx, attempt, holder) })
		r.state = models.AttemptFailed
	case asked == nil:
		err = s.inTx(ctx, func(tx *gorm.DB) error {
			var settleErr error
			r.payment, settleErr = s.shop.Settle(tx, attempt, outcomeOf(charge), holder)
			return settleErr
		})
		r.state = models.AttemptDeclined
		if charge.Status == models.PaymentSucceeded {
			r.state = models.AttemptSucceeded
		}
	default:
		return resolution{state: models.AttemptInDoubt}, asked
	}
	if errors.Is(err, models.ErrPaymentInProgress) {
		// Recorded meanwhile by a run that got the same answer.
		return s.recorded(ctx, attempt)
	}
	if err != nil {
		return resolution{state: models.AttemptInDoubt}, err
	}
	return r, nil
}

// recorded reads what another run recorded of the attempt.
func (s *Service) recorded(ctx context.Context, attempt models.PaymentAttempt) (resolution, error) {
	now, found, err := s.shop.AttemptByKey(ctx, attempt.ProviderKey)
	if err != nil || !found || now.State == models.AttemptInDoubt {
		return resolution{state: models.AttemptInDoubt}, errors.Join(err, models.ErrPaymentInProgress)
	}
	r := resolution{state: now.State}
	if now.State == models.AttemptFailed {
		return r, nil
	}
	payment, ok, err := s.shop.PaymentOf(ctx, attempt.DerivedKey)
	if err != nil || !ok {
		return resolution{state: models.AttemptInDoubt}, errors.Join(err, models.ErrPaymentInProgress)
	}
	r.payment = payment
	return r, nil
}
