package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
)

// Operation is the idempotent operation a payment or a refund runs in: Tx
// is committed with its stored answer; Holder names this run of it, the
// order's holder, whose hold the middleware extends with the key's lease
// (ExtendHold).
type Operation struct {
	DerivedKey, Holder string
	Tx                 func() *gorm.DB
}

// ExtendHold moves the end of holder's hold to until: the middleware's
// ExtendHolds, at each extension of the lease of holder's operation.
func (s *Service) ExtendHold(ctx context.Context, holder string, until time.Time) error {
	return orders.ExtendHold(ctx, s.shop.DB, holder, until)
}

// maxResolutions bounds the earlier requests one operation resolves.
const maxResolutions = 3

// flow is the one protocol for a provider request in doubt (requests.go),
// with what each use does at each step (run, begin, first); R is the
// request's row, T the operation's answer.
type flow[R Row, T any] struct {
	s *Service
	// Names in metrics (by, prefix) and in logs (what, noun).
	by, prefix, what, noun string
	answerOf               func(l Ledger, ctx context.Context, derivedKey string) (T, bool, error)
	send                   func(ctx context.Context, row R) (Outcome, error)
	find                   func(ctx context.Context, row R) (Outcome, bool, error)
	settle                 func(tx *gorm.DB, row R, outcome Outcome, holder string) (T, error)
	late                   func(tx *gorm.DB, row R, outcome Outcome, holder string, now time.Time) (Late, error)
	// refusalAnswers: a definitive refusal is a final answer (a failed
	// refund), not one a retry asks again under a new key (a charge).
	refusalAnswers bool
	// The words recorded on a request the provider never carried out.
	refused, unavailable, noRecord string
	// The answers when the provider did not do its part.
	errUnconfirmed, errEarlierUnconfirmed, errUnavailable, errInDoubt error
}

// beginFunc is Ledger.BeginPayment or Ledger.BeginRefund.
type beginFunc[R Row] func(ctx context.Context, holder string, now, until time.Time) (Begun[R], error)

// run is one run of the operation on the order.
func (f *flow[R, T]) run(ctx context.Context, op Operation, orderID string, begin beginFunc[R]) (T, error) {
	// A run that died may have been settled since: that is the answer.
	if answer, ok, err := f.answerOf(f.s.shop, ctx, op.DerivedKey); err != nil || ok {
		return answer, err
	}
	row, answer, answered, err := f.begin(ctx, op, orderID, op.Holder, begin)
	if answered || err != nil {
		return answer, err
	}
	return f.first(ctx, op, row, op.Holder)
}

// begin records the operation's request, once the earlier ones in doubt
// are resolved; or, answered, knows its answer without one.
func (f *flow[R, T]) begin(ctx context.Context, op Operation, orderID, holder string, begin beginFunc[R]) (row R, answer T, answered bool, err error) {
	for tries := 0; ; tries++ {
		now := f.s.now()
		begun, err := begin(ctx, holder, now, now.Add(f.s.cfg.Lease))
		if refusal := (*models.Error)(nil); errors.As(err, &refusal) {
			// Refused, perhaps by this operation's own request settled since
			// (not a fault: that is told as it is).
			if answer, ok, readErr := f.answerAsWritten(ctx, op.DerivedKey); readErr != nil || ok {
				return row, answer, true, readErr
			}
		}
		if err != nil {
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
		// Resolved; the operation's own, failed, is tried again under a new key.
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
		// No answer: it may have been done. It stays in doubt, the hold let
		// go so that anyone may ask the provider again at once.
		f.s.cfg.Logger.WarnContext(ctx, "payment provider failed", "err", err, f.what, row.Base().ID)
		f.s.releaseHold(ctx, row.Base().OrderID, holder)
		return none, f.errUnconfirmed
	}
	answer, err := f.settle(op.Tx(), row, outcome, holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// The hold passed: the run that took it recorded the same answer.
		if settled, ok, readErr := f.answerOf(f.s.shop, ctx, op.DerivedKey); readErr == nil && ok {
			return settled, nil
		}
	}
	return answer, err
}

// answerAsWritten reads the operation's answer in a transaction, as the write refused
// just now read the order: on SQLite a member of the group-commit transaction, which sees
// what a member before it settled and has not yet committed. (The readers would not, and
// the refusal, an order already paid, would be the key's answer.)
func (f *flow[R, T]) answerAsWritten(ctx context.Context, derivedKey string) (answer T, ok bool, err error) {
	err = f.s.shop.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var readErr error
		answer, ok, readErr = f.answerOf(Ledger{DB: tx}, ctx, derivedKey)
		return readErr
	})
	return answer, ok, err
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
	f.s.provider.WithLabelValues(f.prefix + result).Inc()
	return outcome, err
}

// The service's refusals that are not the shopper's doing: the provider did
// not confirm the operation's own request (Unconfirmed) or an earlier one
// (EarlierUnconfirmed), or refused it before doing anything (Unavailable).
// Each is answered 502 and releases the operation's key, for a retry.
var (
	ErrUnconfirmed = models.Declare(&models.Error{Type: problem.PaymentUnconfirmed,
		Message: "The payment provider did not confirm the charge. Retry with the same key: the provider recognises the retry, so it never charges twice."})
	ErrEarlierUnconfirmed  = models.Declare(&models.Error{Type: problem.PaymentUnconfirmed, Message: models.ErrPaymentInDoubt.Message})
	ErrProviderUnavailable = models.Declare(&models.Error{Type: problem.ProviderUnavailable, Name: "payment-unavailable",
		Message: "The payment provider is unavailable; nothing was charged. Retry with the same key."})

	ErrRefundUnconfirmed = models.Declare(&models.Error{Type: problem.RefundUnconfirmed,
		Message: "The payment provider did not confirm the refund. Retry with the same key: the provider recognises the retry, so it never refunds twice."})
	ErrEarlierRefundUnconfirmed = models.Declare(&models.Error{Type: problem.RefundUnconfirmed,
		Message: "An earlier refund of this order is being confirmed with the payment provider; nothing more was refunded. Try again in a moment."})
	ErrRefundUnavailable = models.Declare(&models.Error{Type: problem.ProviderUnavailable, Name: "refund-unavailable",
		Message: "The payment provider is unavailable; nothing was refunded. Retry with the same key."})
)
