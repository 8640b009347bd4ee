package billing

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// awaiting dates an answer that asks the shopper to authenticate: it
// expires, with the order's hold, AuthExpiry after the attempt first got
// it; past that, the shop ends it (expire), so the order is payable again.
func (s *Service) awaiting(ctx context.Context, a models.PaymentAttempt, outcome Outcome) Outcome {
	if outcome.State != models.RequiresAction {
		return outcome
	}
	outcome.Until = s.now().Add(s.cfg.AuthExpiry)
	action, found, err := s.shop.ActionOf(ctx, a.ProviderKey)
	switch {
	case err != nil || !found:
		return outcome // first asked now (or, unread, as if it were)
	case !s.now().Before(action.ExpiresAt):
		return s.expire(ctx, a, outcome)
	}
	outcome.Until = action.ExpiresAt
	return outcome
}

// expire has the provider stop waiting (Stripe) and declines the attempt;
// if the provider cannot say, it is left waiting, its hold lapsed.
func (s *Service) expire(ctx context.Context, a models.PaymentAttempt, waiting Outcome) Outcome {
	declined := Outcome{State: models.Declined, ProviderID: waiting.ProviderID, Reason: payments.AuthExpired}
	expirer, ok := s.cfg.Provider.(payments.Expirer)
	if !ok {
		return declined
	}
	charge, err := expirer.Expire(ctx, s.chargeRequest(a))
	switch outcome := chargeOutcome(charge); {
	case err != nil || outcome.State == models.RequiresAction:
		s.cfg.Logger.WarnContext(ctx, "an expired authentication could not be ended at the provider", "err", err, "attempt", a.ID)
		waiting.Until = s.now()
		return waiting
	case outcome.State == models.Declined:
		return declined
	default:
		return outcome
	}
}

// Awaited is one of the user's orders; its payment waiting for the shopper
// is asked about at most once an AuthPoll across instances (checkDue), so
// that a reload loop neither spends the provider's rate limit nor writes.
func (s *Service) Awaited(ctx context.Context, userID, orderID string) (models.Order, error) {
	order, err := s.orders.Order(ctx, userID, orderID)
	if err != nil || order.AwaitingAction() == nil {
		return order, err
	}
	attemptID, due, err := s.shop.checkDue(ctx, order.AwaitingAction().ProviderKey, s.now(), s.cfg.AuthPoll)
	if err != nil {
		return order, err
	}
	if due {
		ctx := audit.WithActor(ctx, audit.By(audit.ActorProviderReturn))
		if _, _, err := s.charges.resolveRow(ctx, byReturn, attemptID); err != nil {
			s.cfg.Logger.ErrorContext(ctx, "ask about a payment that waits for the shopper", "err", err, "attempt", attemptID)
		}
		if order, err = s.orders.Order(ctx, userID, orderID); err != nil || order.AwaitingAction() == nil {
			return order, err
		}
	}
	waiting := order.AwaitingAction() // where the shopper authenticates
	action, _, err := s.shop.ActionOf(ctx, waiting.ProviderKey)
	waiting.NextActionURL = action.URL
	return order, err
}

// checkDue takes the turn to ask about the waiting attempt, if not asked
// since poll ago: one conditional update, after a read that finds it due.
func (s Ledger) checkDue(ctx context.Context, providerKey string, now time.Time, poll time.Duration) (string, bool, error) {
	const notAsked = "(checked_at IS NULL OR checked_at <= ?)"
	attempt, found, err := take[models.PaymentAttempt](s.DB.WithContext(ctx).Select("id").
		Where("provider_key = ? AND state = ?", providerKey, models.RequiresAction).Where(notAsked, now.Add(-poll)))
	if err != nil || !found {
		return "", false, err
	}
	res := s.DB.WithContext(ctx).Model(&models.PaymentAttempt{}).Where("id = ?", attempt.ID).Where(notAsked, now.Add(-poll)).UpdateColumn("checked_at", now)
	return attempt.ID, res.RowsAffected == 1, res.Error
}

// Authentication is the simulated provider's record of a charge waiting for
// the shopper, for its page; models.ErrNotFound for Stripe (its own site).
func (s *Service) Authentication(ctx context.Context, chargeID string) (payments.Authentication, error) {
	auth, ok := s.cfg.Provider.(payments.Authenticator)
	if !ok {
		return payments.Authentication{}, models.ErrNotFound
	}
	return found(auth.Authentication(ctx, chargeID))
}

// Authenticate records the shopper's answer on that page, and settles the
// attempt at once: the shopper's return.
func (s *Service) Authenticate(ctx context.Context, chargeID string, complete bool) (payments.Authentication, error) {
	auth, ok := s.cfg.Provider.(payments.Authenticator)
	if !ok {
		return payments.Authentication{}, models.ErrNotFound
	}
	a, err := found(auth.Authenticate(ctx, chargeID, complete))
	if err == nil {
		s.returned(ctx, a.Key)
	}
	return a, err
}

// found is models.ErrNotFound for what the provider did not find.
func found(a payments.Authentication, ok bool, err error) (payments.Authentication, error) {
	if err == nil && !ok {
		err = models.ErrNotFound
	}
	return a, err
}

// returned settles the attempt as the reconciler would; while another run
// holds the order (a double-click), it waits for it, an attempt's time at
// most, so that the page shows the outcome rather than the wait.
func (s *Service) returned(ctx context.Context, providerKey string) {
	attempt, found, err := ByKey[models.PaymentAttempt](ctx, s.shop, providerKey)
	if err == nil && found {
		ctx = audit.WithActor(ctx, audit.By(audit.ActorProviderReturn))
		_, err = backoff.Retry(ctx, func() (bool, error) { return s.settledOnReturn(ctx, attempt.ID) },
			backoff.WithBackOff(backoff.NewConstantBackOff(returnWait)), backoff.WithMaxElapsedTime(s.cfg.AttemptTimeout))
	}
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "settle the attempt the shopper authenticated", "err", err)
	}
}

const returnWait = 50 * time.Millisecond // how often a return looks again

var errSettledElsewhere = errors.New("another run is settling the attempt")

// settledOnReturn settles the attempt, or fails while another run holds it.
func (s *Service) settledOnReturn(ctx context.Context, attemptID string) (bool, error) {
	_, held, err := s.charges.resolveRow(ctx, byReturn, attemptID)
	if err != nil || held {
		return held, backoff.Permanent(err)
	}
	_, waiting, err := take[models.PaymentAttempt](s.shop.DB.WithContext(ctx).Select("id").Where("id = ? AND state = ?", attemptID, models.RequiresAction))
	if err == nil && waiting {
		return false, errSettledElsewhere
	}
	return false, backoff.Permanent(err)
}

// ReturnURL is where a provider sends the shopper back to.
func (s *Service) ReturnURL(orderID string) string { return s.cfg.ReturnURL(orderID) }

// TestCards are the provider's test cards, and its name for the shopper.
func (s *Service) TestCards() (provider string, cards []string) {
	return s.cfg.ProviderName, s.cfg.TestCards
}
