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
// the idempotency middleware hands it to its handler.
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

// maxResolutions bounds how many earlier requests in doubt one operation
// resolves before it gives up; there is at most one in doubt at a time.
const maxResolutions = 3

// flow is the one protocol for a provider request in doubt, and what a use
// of it — a charge, a refund — does at each step. R is the request's row,
// T the operation's answer (a payment, a refund).
//
//  1. The operation's own answer, if a run of it was settled already.
//  2. begin: the hold and the request, committed before the provider is
//     called; or an earlier request still in doubt, resolved first under
//     its own key (resolve.go).
//  3. send under the request's provider key.
//  4. settle through the operation's transaction, which the idempotency
//     middleware commits with the stored answer; or settle failed on the
//     provider's word that nothing was done; or, with no answer, the hold
//     let go and the request left in doubt, for a retry, another
//     operation on the order, the reconciler or a webhook.
type flow[R Row, T any] struct {
	s *Service
	// by names the operations of the use in metrics ("payment", "refund"),
	// prefix starts its metrics' labels; what names its request in logs
	// ("attempt", "refund"), and noun in their messages.
	by, prefix, what, noun string
	answerOf               func(ctx context.Context, derivedKey string) (T, bool, error)
	send                   func(ctx context.Context, row R) (Outcome, error)
	find                   func(ctx context.Context, row R) (Outcome, bool, error)
	settle                 func(tx *gorm.DB, row R, outcome Outcome, holder string) (T, error)
	// late records the provider's later word on a request it had answered
	// (settleLate).
	late func(tx *gorm.DB, row R, outcome Outcome, holder string, now time.Time) (Late, error)
	// refusalAnswers: a definitive refusal of the first request is the
	// operation's final answer (a failed refund), rather than a passing
	// failure that a retry asks again under a new provider key (a charge).
	refusalAnswers bool
	reasons        reasons
	errs           flowErrors
}

// reasons are the words recorded on a request the provider never carried
// out.
type reasons struct{ refused, unavailable, noRecord string }

// flowErrors are a use's answers when the provider did not do its part.
type flowErrors struct {
	// unconfirmed: the operation's own request is in doubt;
	// earlierUnconfirmed: an earlier one, which the provider could not
	// answer for; unavailable: nothing was done, retry.
	unconfirmed, earlierUnconfirmed, unavailable, inDoubt error
}

// beginFunc records the operation's request under holder's hold (see
// Ledger.BeginPayment and Ledger.BeginRefund).
type beginFunc[R Row] func(ctx context.Context, holder string, now, until time.Time) (Begun[R], error)

// run is one run of the operation derivedKey on the order.
func (f *flow[R, T]) run(ctx context.Context, op Operation, orderID string, begin beginFunc[R]) (T, error) {
	// A run of this operation that died may have been settled since, by
	// another operation or the reconciler: that is its answer.
	if answer, ok, err := f.answerOf(ctx, op.DerivedKey); err != nil || ok {
		return answer, err
	}
	// This run holds the order, not the operation: a run that outlived its
	// lease cannot write over the run that took over.
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

// begin records the operation's request under the order's hold, once no
// earlier request of its kind is in doubt: it resolves those first. When
// answered, the operation's answer is known without a request.
func (f *flow[R, T]) begin(ctx context.Context, op Operation, orderID, holder string, begin beginFunc[R]) (row R, answer T, answered bool, err error) {
	for tries := 0; ; tries++ {
		now := f.s.now()
		begun, err := begin(ctx, holder, now, now.Add(f.s.cfg.Lease))
		if err != nil {
			// Refused meanwhile (the order paid, nothing left to refund),
			// perhaps by this operation's own request, settled since the
			// look in run: that is its answer.
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
			return row, answer, false, f.errs.inDoubt
		}
		// An earlier request is in doubt: nothing more may be sent before
		// the provider says what became of it.
		own := begun.Row.Base().DerivedKey == op.DerivedKey
		state, resolved := f.resolve(ctx, f.by, begun.Row, holder)
		switch {
		case state == models.InDoubt && own:
			f.s.releaseHold(ctx, orderID, holder)
			return row, answer, false, f.errs.unconfirmed
		case state == models.InDoubt:
			f.s.releaseHold(ctx, orderID, holder)
			return row, answer, false, f.errs.earlierUnconfirmed
		case state == models.RequiresAction && !own:
			// It waits for the shopper, and holds the order again.
			return row, answer, false, f.errs.inDoubt
		case own && state != models.Failed:
			return row, resolved, true, nil // this operation's own answer, from a run that died
		}
		// Resolved (the operation's own, failed, is tried again under a new
		// provider key): begin finds out what the order allows now.
	}
}

// first sends the operation's request to the provider and records its
// answer.
func (f *flow[R, T]) first(ctx context.Context, op Operation, row R, holder string) (T, error) {
	var none T
	outcome, err := f.call(ctx, row)
	switch {
	case errors.Is(err, payments.ErrRefused) && f.refusalAnswers:
		outcome, err = failed(f.reasons.refused), nil
	case errors.Is(err, payments.ErrRefused), errors.Is(err, payments.ErrUnavailable):
		// Nothing done under the request's key: settled failed at once, so
		// that other keys may try, and a retry asks under a new one.
		if err := f.s.inTx(ctx, func(tx *gorm.DB) error {
			_, settleErr := f.settle(tx, row, failed(f.reasons.unavailable), holder)
			return settleErr
		}); err != nil {
			f.s.cfg.Logger.ErrorContext(ctx, "record a refused "+f.noun, "err", err, f.what, row.Base().ID)
		}
		return none, f.errs.unavailable
	case err != nil:
		// No answer: it may have been done. The request stays in doubt, so
		// that nothing else is sent for the order before the provider is
		// asked again under its key; the hold is let go so that a retry,
		// another operation or the reconciler can do so at once.
		f.s.cfg.Logger.WarnContext(ctx, "payment provider failed", "err", err, f.what, row.Base().ID)
		f.s.releaseHold(ctx, row.Base().OrderID, holder)
		return none, f.errs.unconfirmed
	}
	answer, err := f.settle(op.Tx(), row, outcome, holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// The hold passed while the provider answered: the run that took it
		// resolved this request, with the provider's same answer.
		if settled, ok, readErr := f.answerOf(ctx, op.DerivedKey); readErr == nil && ok {
			return settled, nil
		}
	}
	return answer, err
}

// call sends the request, and counts the provider's answer.
func (f *flow[R, T]) call(ctx context.Context, row R) (Outcome, error) {
	outcome, err := f.send(ctx, row)
	f.s.metrics.provider.WithLabelValues(f.prefix + result(outcome, err)).Inc()
	return outcome, err
}

func failed(reason string) Outcome {
	return Outcome{State: models.Failed, Reason: reason}
}

// result names a provider's answer in metrics.
func result(outcome Outcome, err error) string {
	switch {
	case errors.Is(err, payments.ErrRefused):
		return "refused"
	case errors.Is(err, payments.ErrUnavailable):
		return "unavailable"
	case err != nil:
		return "error"
	}
	return string(outcome.State)
}
