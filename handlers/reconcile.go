package handlers

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// unresolved is the outcome, as logs and metrics name it, of a resolution
// the provider could not answer: the attempt is still in doubt. The others
// are the payment's status, succeeded or declined.
const unresolved = "unresolved"

// resolve finds out what became of an attempt in doubt by sending its exact
// request again under its own key: the provider answers a repeat with the
// first request's outcome, or makes the charge once if the first never
// arrived. holder holds the attempt's order; the answer is recorded under
// that hold. It reports the payment recorded, and false when the attempt is
// still in doubt. Only an outcome settles it: a refusal of this request
// (rate limited, unauthorized, unavailable) comes before the provider's
// idempotency layer and says nothing about the first request.
func (s *Server) resolve(ctx context.Context, by string, attempt models.PaymentAttempt, holder string) (models.Payment, bool) {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout())
	defer cancel()
	charge, err := s.ask(ctx, attempt)
	s.metrics.provider.WithLabelValues(providerResult(charge, err)).Inc()
	var payment models.Payment
	outcome := unresolved
	if err == nil {
		payment, err = s.shop.SettleNow(context.WithoutCancel(ctx), attempt, outcomeOf(charge), holder)
		if errors.Is(err, models.ErrPaymentInProgress) {
			// Recorded meanwhile by a run that got the same answer.
			var ok bool
			payment, ok, err = s.shop.PaymentOf(ctx, attempt.Operation)
			if err == nil && !ok {
				err = models.ErrPaymentInProgress
			}
		}
		if err == nil {
			outcome = payment.Status
		}
	}
	s.metrics.resolutions.WithLabelValues(by, outcome).Inc()
	log := s.deps.Logger.With("attempt", attempt.ID, "order", attempt.OrderID, "by", by, "outcome", outcome)
	if outcome == unresolved {
		log.Warn("payment attempt still in doubt: the provider could not say what became of it", "err", err)
		return models.Payment{}, false
	}
	log.Info("payment attempt in doubt resolved with the provider", "charge", payment.ProviderChargeID)
	return payment, true
}

// errNotFound: the provider shows nothing under the attempt's key yet.
var errNotFound = errors.New("the payment provider shows no charge under the attempt's key")

// ask sends the attempt's request again — or, past the lifetime of a
// provider's keys, when a repeat could be taken as new, looks up what the
// provider did under the key instead.
func (s *Server) ask(ctx context.Context, attempt models.PaymentAttempt) (payments.Charge, error) {
	finder, ok := s.deps.Provider.(payments.Finder)
	if !ok || s.deps.Now().Sub(attempt.CreatedAt) < finder.KeyLifetime() {
		return s.deps.Provider.Charge(ctx, chargeRequest(attempt))
	}
	charge, found, err := finder.Find(ctx, chargeRequest(attempt))
	if err == nil && !found {
		err = errNotFound
	}
	return charge, err
}

// attemptTimeout bounds one resolution's provider call: the idempotency
// middleware's timeout, 4 × the lease.
func (s *Server) attemptTimeout() time.Duration { return 4 * s.deps.Lease }

// reconcileBatch is how many attempts in doubt one reconcile pass takes on.
const reconcileBatch = 100

// Reconcile resolves the payment attempts in doubt that no live operation
// holds, so that a charge the provider took is recorded, and its order
// paid, even if nobody retries. Any number of instances may run it at once:
// each attempt is resolved under its order's hold, which one of them gets.
// It reports how many it resolved.
func (s *Server) Reconcile(ctx context.Context) (int, error) {
	attempts, err := s.shop.StaleAttempts(ctx, s.deps.Now().UTC(), reconcileBatch)
	if err != nil {
		return 0, err
	}
	resolved := 0
	var errs []error
	for _, a := range attempts {
		holder := "reconcile_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		now := s.deps.Now().UTC()
		// Held for as long as the resolution's provider call may take.
		attempt, held, err := s.shop.HoldForResolution(ctx, a.ID, holder, now, now.Add(s.attemptTimeout()+s.deps.Lease))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !held {
			continue // resolved meanwhile, or taken by a live operation or another reconciler
		}
		if _, ok := s.resolve(ctx, "reconciler", attempt, holder); ok {
			resolved++
		} else {
			s.releaseHold(ctx, attempt.OrderID, holder)
		}
	}
	return resolved, errors.Join(errs...)
}
