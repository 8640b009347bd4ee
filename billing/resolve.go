package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Who resolves a request in doubt, as logs and metrics name them.
const (
	byPayment    = "payment"
	byRefund     = "refund"
	byReconciler = "reconciler"
	byWebhook    = "webhook"
	byStaff      = "staff"  // the console's "Ask the provider now"
	byReturn     = "return" // the shopper's return from an authentication
)

// errNothingDone: a request past the roll-forward window of which the
// provider has no record.
var errNothingDone = errors.New("the payment provider has no record of the request's key")

// resolve asks the provider what became of a request in doubt, and records
// it under holder's hold (the money rule: only its word on the request's own
// key resolves it). It returns the request's state now (InDoubt when the
// provider could not say) and, unless it failed, the operation's answer.
func (f *flow[R, T]) resolve(ctx context.Context, by string, row R, holder string) (models.State, T) {
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.AttemptTimeout)
	defer cancel()
	outcome, err := f.ask(ctx, row)
	f.s.metrics.provider.WithLabelValues(f.prefix + result(outcome, err)).Inc()
	switch {
	case errors.Is(err, payments.ErrRefused):
		outcome, err = failed(f.refused), nil
	case errors.Is(err, errNothingDone):
		outcome, err = failed(f.noRecord), nil
	}
	state, answer := models.InDoubt, *new(T)
	if err == nil {
		state, answer, err = f.record(ctx, row, outcome, holder)
	}
	f.s.metrics.resolutions.WithLabelValues(by, f.label(state)).Inc()
	log := f.s.cfg.Logger.With(f.what, row.Base().ID, "order", row.Base().OrderID, "by", by, "outcome", f.label(state))
	switch state {
	case models.InDoubt:
		log.WarnContext(ctx, f.noun+" still in doubt: the provider could not say what became of it", "err", err)
	case models.RequiresAction:
		log.InfoContext(ctx, f.noun+" still waits for the shopper to authenticate")
	default:
		log.InfoContext(ctx, f.noun+" in doubt resolved with the provider", "provider_id", outcome.ProviderID)
	}
	return state, answer
}

// label names a resolution in metrics: the request's state, or
// "unresolved".
func (f *flow[R, T]) label(state models.State) string {
	if state.Open() {
		return "unresolved"
	}
	return f.prefix + string(state)
}

// ask sends the request again while it is younger than the roll-forward
// window and the provider's memory of keys (a repeat gets the first
// answer, or is carried out once); an older one, or one that waits for the
// shopper, is only looked up, so nothing is done long after the shopper
// gave up.
func (f *flow[R, T]) ask(ctx context.Context, row R) (Outcome, error) {
	waiting := row.Base().State == models.RequiresAction
	if !waiting && f.s.now().Sub(row.Base().CreatedAt) < min(f.s.cfg.RollForward, f.s.cfg.Provider.KeyLifetime()) {
		if err := f.s.shop.DB.WithContext(ctx).Model(&row).Where("id = ?", row.Base().ID).Update("sent_at", f.s.now()).Error; err != nil {
			return Outcome{}, err
		}
		return f.send(ctx, row)
	}
	outcome, found, err := f.find(ctx, row)
	if err == nil && !found {
		err = f.s.nothingFound(row.Base().LastSent())
	}
	return outcome, err
}

// searchLag is how long a provider's search may take to show a request
// (Stripe's: "under a minute", more in an outage).
const searchLag = 5 * time.Minute

// errNotYetKnown: a lookup found nothing, but a request under the key may
// still be running, or too recent for the provider's search to show.
var errNotYetKnown = errors.New("the payment provider shows nothing under the key yet")

// nothingFound is what a lookup that found nothing proves: nothing done
// only once the last request under the key, sent at lastSent, has ended
// and the search has caught up.
func (s *Service) nothingFound(lastSent time.Time) error {
	if s.now().Sub(lastSent) < s.cfg.AttemptTimeout+s.cfg.Lease+searchLag {
		return errNotYetKnown
	}
	return errNothingDone
}

// record writes what the provider said of the request, under holder's hold.
func (f *flow[R, T]) record(ctx context.Context, row R, outcome Outcome, holder string) (models.State, T, error) {
	answer, err := f.settleAlone(ctx, row, outcome, holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		return f.recorded(ctx, row) // recorded meanwhile by a run that got the same answer
	}
	if err != nil {
		return models.InDoubt, answer, err
	}
	return outcome.State, answer, nil
}

// recorded reads what another run recorded of the request.
func (f *flow[R, T]) recorded(ctx context.Context, row R) (models.State, T, error) {
	var none T
	now, found, err := ByKey[R](ctx, f.s.shop, row.Base().ProviderKey)
	if err != nil || !found || now.Base().State.Open() {
		return models.InDoubt, none, errors.Join(err, models.ErrPaymentInProgress)
	}
	if now.Base().State == models.Failed {
		return models.Failed, none, nil
	}
	answer, ok, err := f.answerOf(ctx, row.Base().DerivedKey)
	if err != nil || !ok {
		return models.InDoubt, none, errors.Join(err, models.ErrPaymentInProgress)
	}
	return now.Base().State, answer, nil
}

// settleAlone settles the row in a transaction of its own, which a client
// that leaves cannot cancel: what the provider said is recorded regardless.
func (f *flow[R, T]) settleAlone(ctx context.Context, row R, outcome Outcome, holder string) (answer T, err error) {
	err = f.s.cfg.DB.WithContext(context.WithoutCancel(ctx)).Transaction(func(tx *gorm.DB) error {
		answer, err = f.settle(tx, row, outcome, holder)
		return err
	})
	return answer, err
}
