package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// Operation is the idempotent operation a payment or a refund runs in, as
// the idempotency middleware hands it over: DerivedKey names it to the
// provider and on its rows; Tx, begun on first use, is committed with the
// stored answer; OnLeaseExtended runs fn at each extension of the lease, so
// that the order's hold lasts as long as the operation.
type Operation struct {
	DerivedKey      string
	Tx              func() *gorm.DB
	OnLeaseExtended func(fn func(ctx context.Context, until time.Time) error)
}

// maxResolutions bounds the earlier requests in doubt one operation
// resolves before it gives up (there is at most one at a time).
const maxResolutions = 3

// flow is the one protocol for a provider request in doubt, with what each
// use (a charge, a refund) does at each step; R is the request's row, T the
// operation's answer.
//
//  1. The operation's own answer, if a run of it was settled already.
//  2. begin: the hold and the request, committed before the provider is
//     called; or an earlier request in doubt, resolved first (resolve.go).
//  3. send under the request's provider key.
//  4. settle through the operation's transaction; or settle failed on the
//     provider's word that nothing was done; or, with no answer, let go of
//     the hold and leave the request in doubt for whoever comes next.
type flow[R Row, T any] struct {
	s *Service
	// by names the use's operations in metrics, prefix starts its metrics'
	// labels; what names its request in logs, and noun in their messages.
	by, prefix, what, noun string
	answerOf               func(ctx context.Context, derivedKey string) (T, bool, error)
	send                   func(ctx context.Context, row R) (Outcome, error)
	find                   func(ctx context.Context, row R) (Outcome, bool, error)
	settle                 func(tx *gorm.DB, row R, outcome Outcome, holder string) (T, error)
	late                   func(tx *gorm.DB, row R, outcome Outcome, holder string, now time.Time) (Late, error)
	// refusalAnswers: a definitive refusal of the first request is the
	// operation's final answer (a failed refund), not a passing failure
	// that a retry asks again under a new provider key (a charge).
	refusalAnswers bool
	// The words recorded on a request the provider never carried out.
	refused, unavailable, noRecord string
	// The answers when the provider did not do its part: the operation's
	// own request is in doubt, or an earlier one; nothing was done; an
	// earlier request is still in doubt, or waits for the shopper.
	errUnconfirmed, errEarlierUnconfirmed, errUnavailable, errInDoubt error
}

// beginFunc records the operation's request under holder's hold
// (Ledger.BeginPayment, Ledger.BeginRefund).
type beginFunc[R Row] func(ctx context.Context, holder string, now, until time.Time) (Begun[R], error)

// run is one run of the operation on the order.
func (f *flow[R, T]) run(ctx context.Context, op Operation, orderID string, begin beginFunc[R]) (T, error) {
	// A run that died may have been settled since: that is the answer.
	if answer, ok, err := f.answerOf(ctx, op.DerivedKey); err != nil || ok {
		return answer, err
	}
	holder := orders.NewHolder(op.DerivedKey)
	op.OnLeaseExtended(func(ctx context.Context, until time.Time) error {
		return orders.ExtendHold(ctx, f.s.shop.DB, orderID, holder, until)
	})
	row, answer, answered, err := f.begin(ctx, op, orderID, holder, begin)
	if answered || err != nil {
		return answer, err
	}
	return f.first(ctx, op, row, holder)
}

// begin records the operation's request under the order's hold, once the
// earlier requests of its kind in doubt are resolved. When answered, the
// operation's answer is known without a request.
func (f *flow[R, T]) begin(ctx context.Context, op Operation, orderID, holder string, begin beginFunc[R]) (row R, answer T, answered bool, err error) {
	for tries := 0; ; tries++ {
		now := f.s.now()
		begun, err := begin(ctx, holder, now, now.Add(f.s.cfg.Lease))
		if err != nil {
			// Refused (the order paid, nothing left), perhaps by this
			// operation's own request settled since run looked: its answer.
			if answer, ok, readErr := f.answerOf(ctx, op.DerivedKey); readErr != nil || ok {
				return row, answer, true, readErr
			}
			return row, answer, false, err
		}
		if !begun.Unresolved {
			return begun.Row, answer, false, nil
		}
		if tries == maxResolutions {
			f.s.releaseHold(ctx, orderID, holder)
			return row, answer, false, f.errInDoubt
		}
		own := begun.Row.Base().DerivedKey == op.DerivedKey
		state, resolved := f.resolve(ctx, f.by, begun.Row, holder)
		switch {
		case state == models.InDoubt && own:
			f.s.releaseHold(ctx, orderID, holder)
			return row, answer, false, f.errUnconfirmed
		case state == models.InDoubt:
			f.s.releaseHold(ctx, orderID, holder)
			return row, answer, false, f.errEarlierUnconfirmed
		case state == models.RequiresAction && !own:
			// It waits for the shopper, and holds the order again.
			return row, answer, false, f.errInDoubt
		case own && state != models.Failed:
			return row, resolved, true, nil // this operation's own answer, from a run that died
		}
		// Resolved (the operation's own, failed, is tried again under a new
		// provider key): begin sees what the order allows now.
	}
}

// first sends the operation's request and records the provider's answer.
func (f *flow[R, T]) first(ctx context.Context, op Operation, row R, holder string) (T, error) {
	var none T
	outcome, err := f.counted(f.send(ctx, row))
	switch {
	case errors.Is(err, payments.ErrRefused) && f.refusalAnswers:
		outcome, err = failed(f.refused), nil
	case errors.Is(err, payments.ErrRefused), errors.Is(err, payments.ErrUnavailable):
		// Nothing done under the key: settled failed now, so that other keys
		// may try, and a retry asks under a new one.
		if _, err := f.settleAlone(ctx, row, failed(f.unavailable), holder); err != nil {
			f.s.cfg.Logger.ErrorContext(ctx, "record a refused "+f.noun, "err", err, f.what, row.Base().ID)
		}
		return none, f.errUnavailable
	case err != nil:
		// No answer: it may have been done. It stays in doubt, so nothing
		// else is sent for the order before the provider is asked again
		// under its key; the hold is let go so anyone may ask at once.
		f.s.cfg.Logger.WarnContext(ctx, "payment provider failed", "err", err, f.what, row.Base().ID)
		f.s.releaseHold(ctx, row.Base().OrderID, holder)
		return none, f.errUnconfirmed
	}
	answer, err := f.settle(op.Tx(), row, outcome, holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// The hold passed meanwhile: the run that took it resolved the
		// request, with the provider's same answer.
		if settled, ok, readErr := f.answerOf(ctx, op.DerivedKey); readErr == nil && ok {
			return settled, nil
		}
	}
	return answer, err
}

// failed is the outcome of a request the provider never carried out.
func failed(reason string) Outcome {
	return Outcome{State: models.Failed, Reason: reason}
}

// counted counts the provider's answer in metrics.
func (f *flow[R, T]) counted(outcome Outcome, err error) (Outcome, error) {
	result := string(outcome.State)
	switch {
	case errors.Is(err, payments.ErrRefused):
		result = "refused"
	case errors.Is(err, payments.ErrUnavailable):
		result = "unavailable"
	case err != nil:
		result = "error"
	}
	f.s.metrics.provider.WithLabelValues(f.prefix + result).Inc()
	return outcome, err
}
