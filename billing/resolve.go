package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
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

var (
	errNothingDone = errors.New("the payment provider has no record of the request's key")
	errNotYetKnown = errors.New("the payment provider shows nothing under the key yet")
)

// searchLag is how long a search may lag (Stripe's: "under a minute").
const searchLag = 5 * time.Minute

// resolve asks the provider what became of a request in doubt and records
// it under holder's hold; it returns the state now, and the answer.
func (f *flow[R, T]) resolve(ctx context.Context, by string, row R, holder string) (models.State, T) {
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.AttemptTimeout)
	defer cancel()
	outcome, err := f.counted(f.ask(ctx, row))
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
	f.s.resolutions.WithLabelValues(by, f.label(state)).Inc()
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

// label names a resolution in metrics: the request's state, or "unresolved".
func (f *flow[R, T]) label(state models.State) string {
	if state.Open() {
		return "unresolved"
	}
	return f.prefix + string(state)
}

// ask sends the request again while it is younger than the roll-forward
// window and the provider's memory of keys. An older one, or one waiting
// for the shopper, is only looked up: not found proves nothing was done
// once the last request under the key has ended and the search caught up.
func (f *flow[R, T]) ask(ctx context.Context, row R) (Outcome, error) {
	now := f.s.now()
	if row.Base().State != models.RequiresAction && now.Sub(row.Base().CreatedAt) < min(f.s.cfg.RollForward, f.s.cfg.Provider.KeyLifetime()) {
		if err := f.s.shop.DB.WithContext(ctx).Model(&row).Where("id = ?", row.Base().ID).Update("sent_at", now).Error; err != nil {
			return Outcome{}, err
		}
		return f.send(ctx, row)
	}
	outcome, found, err := f.find(ctx, row)
	switch {
	case err != nil || found:
		return outcome, err
	case f.s.now().Sub(row.Base().LastSent()) < f.s.cfg.AttemptTimeout+f.s.cfg.Lease+searchLag:
		return outcome, errNotYetKnown
	}
	return outcome, errNothingDone
}

// record writes the provider's answer, or reads another run's record of it.
func (f *flow[R, T]) record(ctx context.Context, row R, outcome Outcome, holder string) (models.State, T, error) {
	var none T
	answer, err := f.settleAlone(ctx, row, outcome, holder)
	switch {
	case err == nil:
		return outcome.State, answer, nil
	case !errors.Is(err, models.ErrPaymentInProgress):
		return models.InDoubt, answer, err
	}
	now, found, err := ByKey[R](ctx, f.s.shop, row.Base().ProviderKey)
	if err != nil || !found || now.Base().State.Open() {
		return models.InDoubt, none, errors.Join(err, models.ErrPaymentInProgress)
	}
	if now.Base().State == models.Failed {
		return models.Failed, none, nil
	}
	answer, ok, err := f.answerOf(f.s.shop, ctx, row.Base().DerivedKey)
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

// resolveRow resolves the row id now under its order's hold: held is false,
// and nothing asked, when it is settled or another run holds the order.
func (f *flow[R, T]) resolveRow(ctx context.Context, by, id string) (state models.State, held bool, err error) {
	holder := orders.NewHolder(by)
	now := f.s.now()
	row, held, err := HoldForResolution[R](ctx, f.s.shop, id, holder, now, now.Add(f.s.cfg.AttemptTimeout+f.s.cfg.Lease))
	if err != nil || !held {
		return "", false, err
	}
	if state, _ = f.resolve(ctx, by, row, holder); state.Open() {
		f.s.releaseHold(ctx, row.Base().OrderID, holder)
	}
	return state, true, nil
}

// reconcileBatch is how many requests of each kind one pass takes on.
const reconcileBatch = 100

// Reconcile resolves the requests in doubt no live run holds, even if
// nobody retries; instances may run it at once. It reports how many.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	ctx = audit.WithActor(ctx, audit.By(audit.ActorReconciler))
	charges, err := s.charges.reconcile(ctx)
	refunds, refundsErr := s.refunds.reconcile(ctx)
	return charges + refunds, errors.Join(err, refundsErr)
}

func (f *flow[R, T]) reconcile(ctx context.Context) (int, error) {
	rows, err := Stale[R](ctx, f.s.shop, f.s.now(), reconcileBatch)
	if err != nil {
		return 0, err
	}
	resolved := 0
	for _, stale := range rows {
		state, held, resolveErr := f.resolveRow(ctx, byReconciler, stale.Base().ID)
		if err = errors.Join(err, resolveErr); held && !state.Open() {
			resolved++
		}
	}
	return resolved, err
}

// ErrNotInDoubt: staff asked about a request not in doubt (any more), or
// being resolved right now; nothing was asked.
var ErrNotInDoubt = models.Declare(&models.Error{Type: problem.Conflict, Name: "not-in-doubt",
	Message: "This request is not in doubt, or is being resolved right now: nothing was asked of the provider."})

// ResolveNow resolves the attempt or refund id (kind orders.DoubtPayment or
// DoubtRefund) as the reconciler would, for by, staff in the database now:
// it may send the request again.
func (s *Service) ResolveNow(ctx context.Context, by models.User, kind, id string) (models.State, error) {
	if err := accounts.StaffNow(s.shop.DB.WithContext(ctx), by.ID); err != nil {
		return "", err
	}
	resolveRow := map[string]func(ctx context.Context, by, id string) (models.State, bool, error){
		orders.DoubtPayment: s.charges.resolveRow, orders.DoubtRefund: s.refunds.resolveRow,
	}[kind]
	if resolveRow == nil {
		return "", models.ErrNotFound
	}
	state, held, err := resolveRow(ctx, byStaff, id)
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		err = models.ErrNotFound
	case err == nil && !held:
		err = ErrNotInDoubt
	}
	return state, err
}

// ApplyEvent applies a provider's event through tx, the delivery's
// transaction, and reports whether it changed anything.
func (s *Service) ApplyEvent(ctx context.Context, tx func() *gorm.DB, event payments.Event) (bool, error) {
	if event.Refund != nil {
		return s.refunds.applyEvent(ctx, tx, event.ID, event.ProviderKey, refundOutcome(*event.Refund))
	}
	return s.charges.applyEvent(ctx, tx, event.ID, event.ProviderKey, chargeOutcome(event.Charge))
}

// applyEvent settles the open request with the event, under a hold of its
// own (on failure it lapses: let go from another connection while tx is
// open, it would wait for tx's lock on SQLite). On an answered request only
// flow.late writes, so a late delivery never un-pays an order. While a live
// run holds the order, ErrPaymentInProgress: the provider delivers again.
func (f *flow[R, T]) applyEvent(ctx context.Context, tx func() *gorm.DB, eventID, providerKey string, outcome Outcome) (bool, error) {
	db := func() *gorm.DB { // its writes audited as the webhook's
		db := tx()
		return db.WithContext(audit.WithActor(db.Statement.Context, audit.By(audit.ActorWebhook)))
	}
	holder, now := orders.NewHolder(byWebhook+":"+eventID), f.s.now()
	row, found, err := ByKey[R](ctx, f.s.shop, providerKey)
	if err != nil || !found {
		return false, err // not one of ours
	}
	log := f.s.cfg.Logger.With(f.what, row.Base().ID, "order", row.Base().OrderID, "event", eventID)
	if row.Base().State.Open() {
		held := false
		// Settled since ByKey read it, the row goes down the late path too.
		switch row, held, err = HoldForResolution[R](ctx, f.s.shop, row.Base().ID, holder, now, now.Add(f.s.cfg.Lease)); {
		case err != nil:
			return false, err
		case !held && row.Base().State.Open():
			return false, models.ErrPaymentInProgress
		case held:
			if _, err := f.settle(db(), row, outcome, holder); err != nil {
				return false, err
			}
			f.s.resolutions.WithLabelValues(byWebhook, f.label(outcome.State)).Inc()
			log.InfoContext(ctx, f.noun+" in doubt resolved by a provider event", "outcome", outcome.State)
			return true, nil
		}
	}
	late, err := f.late(db(), row, outcome, holder, now)
	if err != nil || late.Label == "" {
		return late.Moved, err
	}
	f.s.resolutions.WithLabelValues(byWebhook, late.Label).Inc()
	log.ErrorContext(ctx, late.Warning, "provider_id", outcome.ProviderID)
	return true, nil
}
