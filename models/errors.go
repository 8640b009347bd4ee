package models

import (
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shop/shop/problem"
)

// Code says what kind of failure an Error without a problem type of its own
// is; one renderer maps it to a status.
type Code string

const (
	EINVALID      Code = "invalid"      // the input breaks a rule: 422
	ENOTFOUND     Code = "not_found"    // missing, or not the caller's: 404
	ECONFLICT     Code = "conflict"     // the state forbids it: 409
	EUNAUTHORIZED Code = "unauthorized" // who is asking is unknown: 401
)

// Error is a failure the client can act on. Anything else is internal. A
// named error says, where it is declared, all that is told of it: its
// problem type, whether its answer is final, and its words for a shopper.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	// Type is the problem type the error answers; the zero Type answers by Code.
	Type problem.Type
	// Final: execution began and the same request would get this answer
	// again, so it is stored and replayed for its key, not released.
	Final bool
	// Shopper is the error in a shopper's words.
	Shopper Words
	// RetryAfter, when set, says in seconds when to retry.
	RetryAfter int
	// Payment is the declined payment a payment-declined answer carries.
	Payment *Payment
	// Shortages are the lines an out-of-stock answer could not cover.
	Shortages []Shortage
}

// Words tell an error to a shopper: on the browser's pages, and on the
// Activity page, which lists the forms the shopper sent.
type Words struct {
	Heading string // the error page's heading
	Text    string // what happened, what was not done, what to do next
	// Retry labels the button that sends the form again; "" when sending
	// it again is not the answer (always so for a final answer).
	Retry string
	// Outcome ends the Activity line of a form that got this answer.
	Outcome string
}

// FieldError names one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Type.Slug != "" {
		return e.Type.Slug + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// With is the error with another message for the API, as when the bank
// says why it declined.
func (e *Error) With(message string) *Error {
	again := *e
	again.Message = message
	return &again
}

// ForNow is the error, not final: the same request may get another answer
// later.
func (e *Error) ForNow() *Error {
	again := *e
	again.Final = false
	return &again
}

// Invalid returns an EINVALID error listing the fields at fault.
func Invalid(fields ...FieldError) *Error {
	return &Error{Code: EINVALID, Message: "The request has invalid fields.", Fields: fields}
}

// DeclinedError is the error a payment the provider declined answers: final,
// the attempt being recorded on the order, with the bank's reason.
func DeclinedError(p Payment) *Error {
	e := ErrPaymentDeclined.With(p.DeclineReason)
	e.Payment = &p
	return e
}

// declared are the named errors, so that what a problem type means to a
// shopper and whether its answer is final can be found from the type.
var declared []*Error

// Declare records a named error as declared; the named errors of every
// package are declared with it, once, where they are defined.
func Declare(e *Error) *Error {
	declared = append(declared, e)
	return e
}

// Declared is the named error of a problem type, the first declared, which
// tells a bare problem of the type; nil when the type has none.
func Declared(uri string) *Error {
	for _, e := range declared {
		if e.Type.URI() == uri {
			return e
		}
	}
	return nil
}

// FinalTypes are the problem types of the final errors.
func FinalTypes() []problem.Type {
	var final []problem.Type
	for _, e := range declared {
		if e.Final && !slices.Contains(final, e.Type) {
			final = append(final, e.Type)
		}
	}
	return final
}

// The named errors of the domain. Final ones are the answers where execution
// began and the same request would always get them again.
var (
	// ErrOrderPaid: a payment of an order already paid.
	ErrOrderPaid = Declare(&Error{Type: problem.OrderPaid, Final: true, Message: "This order is already paid.",
		Shopper: Words{Heading: "Already paid", Text: "An earlier payment of this order went through (from another tab or window, or one that was being confirmed), so nothing was charged to the card you chose here.",
			Outcome: paidOrCancelled}})
	// ErrPaidNotCancellable: a cancel of an order already paid.
	ErrPaidNotCancellable = Declare(&Error{Type: problem.OrderPaid, Final: true, Message: "This order is paid, so it cannot be cancelled: refund it instead.",
		Shopper: Words{Heading: "Already paid", Text: "This order is paid, so it cannot be cancelled. Refunds are given by the shop's staff: contact us.",
			Outcome: "the order had already been paid, so it was not cancelled"}})
	// ErrOrderCancelled: a payment of a cancelled order.
	ErrOrderCancelled = Declare(&Error{Type: problem.OrderCancelled, Final: true, Message: "This order was cancelled, so it cannot be paid; nothing was charged.",
		Shopper: Words{Heading: "This order was cancelled", Text: "This order was cancelled, so it cannot be paid, and nothing was charged. You can place a new order from the catalog.",
			Outcome: paidOrCancelled}})
	// ErrPaymentDeclined: the provider declined the card; see Declined.
	ErrPaymentDeclined = Declare(&Error{Type: problem.PaymentDeclined, Final: true, Message: "Your card was declined.",
		Shopper: Words{Heading: "Your card was declined", Text: "Nothing was charged: choose another card and pay again.",
			Outcome: "the card was declined, so nothing was charged"}})
	// ErrRefundExceeds: a refund of more than is still refundable, refunds
	// already made or in progress counted.
	ErrRefundExceeds = Declare(&Error{Type: problem.RefundExceeds, Final: true, Message: "The amount is more than what can still be refunded on this order.",
		Shopper: Words{Heading: "More than is left to refund", Text: "That is more than can still be refunded on this order; nothing was refunded.",
			Outcome: "it was more than could still be refunded, so nothing was refunded"}})
	// ErrRefundFailed: the provider could not send the refund to the card.
	ErrRefundFailed = Declare(&Error{Type: problem.RefundFailed, Final: true, Message: "The refund could not be sent to the card.",
		Shopper: Words{Heading: "The refund could not be sent to your card", Text: "The card provider refused it (the card's account may be closed), so nothing was given back. Contact us to be paid back another way.",
			Outcome: "the card provider refused it, so nothing was given back"}})
	// ErrOrderNotPaid: a refund of an order that was never charged. Not
	// final: the order may yet be paid.
	ErrOrderNotPaid = Declare(&Error{Type: problem.OrderNotPaid, Message: "This order is not paid, so there is nothing to refund.",
		Shopper: Words{Heading: "Not paid", Text: "This order is not paid, so there is nothing to refund."}})
)

// paidOrCancelled tells on the Activity page a payment refused as already
// paid or as cancelled, which the page cannot tell apart by the status.
const paidOrCancelled = "the order had already been paid or was cancelled, so nothing was charged"

var (
	// ErrPaymentInProgress: another payment or refund of the order is
	// running. Not final: retry once it has finished.
	ErrPaymentInProgress = Declare(&Error{Type: problem.PaymentInProgress, RetryAfter: 1, Message: "Another payment of this order is in progress; retry shortly.",
		Shopper: Words{Heading: "Another payment or refund is under way", Text: "Another payment or refund of this order is being processed right now, so nothing was done. Wait a moment, then look at the order again."}})
	// ErrPaymentInDoubt: an earlier payment of the order reached the
	// provider and its outcome is not known yet. Not final: nothing was
	// charged by this request, and the order cannot be charged again until
	// that payment is confirmed, by the next payment of the order or the
	// reconciler.
	ErrPaymentInDoubt = Declare(&Error{Type: problem.PaymentInProgress, RetryAfter: 1, Message: "The last payment of this order is being confirmed with the payment provider; nothing more was charged. Try again in a moment.",
		Shopper: Words{Heading: "Your last payment is being confirmed", Text: "The card provider has not yet told us whether the last payment of this order went through, so nothing more was done. Look at the order again in a moment."}})
	// ErrPaymentAwaiting: an earlier payment of the order waits for the
	// shopper to authenticate it. Not final: once it has ended, failed or
	// expired, the order can be paid again.
	ErrPaymentAwaiting = Declare(&Error{Type: problem.PaymentInProgress, RetryAfter: 1, Message: "The last payment of this order waits for the cardholder to authenticate it; nothing more was charged. Retry once it has ended.",
		Shopper: Words{Heading: "Authenticate to pay", Text: "The last payment of this order waits for you to authenticate it with your card provider, so nothing more was done. Open the order to authenticate."}})
	// ErrRefundInDoubt: an earlier refund of the order reached the provider
	// and its outcome is not known yet. Not final: nothing more was
	// refunded by this request.
	ErrRefundInDoubt = Declare(&Error{Type: problem.PaymentInProgress, RetryAfter: 1, Message: "The last refund of this order is being confirmed with the payment provider; nothing more was refunded. Try again in a moment.",
		Shopper: Words{Heading: "Your last refund is being confirmed", Text: "The card provider has not yet told us whether the last refund of this order went through, so nothing more was refunded. Look at the order again in a moment."}})
	// ErrOutOfStock: a line of an order asks for more than the product has
	// left. Not final: nothing was reserved nor kept, and once restocked
	// the same order may succeed with the same key.
	ErrOutOfStock = Declare(&Error{Type: problem.OutOfStock, Message: "There is not enough in stock for this order; nothing was ordered.",
		Shopper: Words{Heading: "Not enough in stock", Text: "Someone bought the last units first, so there is not enough left for your order, and nothing was ordered. Lower the quantities marked, or remove them, and place the order again."}})
	// ErrTooManyPendingOrders: the shopper holds as many unpaid orders as
	// allowed. Not final: nothing was written, and once one of them is paid
	// or cancelled the same order may succeed with the same key.
	ErrTooManyPendingOrders = Declare(&Error{Type: problem.TooManyPendingOrders, Message: "You have too many unpaid orders; nothing was ordered. Pay or cancel one of them first.",
		Shopper: Words{Heading: "Too many unpaid orders", Text: "You already have as many unpaid orders as we keep at once, and nothing was ordered. Pay or cancel one of them, then place this order again."}})
	// ErrEmailTaken: sign up with an address that already has an account.
	ErrEmailTaken = Declare(&Error{Type: problem.EmailTaken, Message: "An account with this email already exists.",
		Shopper: Words{Heading: "Email already registered", Text: "An account with this email already exists. Log in instead."}})
	// ErrBadCredentials: wrong email or password, or an unknown token.
	ErrBadCredentials = Declare(&Error{Type: problem.BadCredentials, Message: "The email or password is wrong.",
		Shopper: Words{Heading: "Wrong email or password", Text: "Wrong email or password."}})
	// ErrBadToken: a bearer token this server never issued.
	ErrBadToken = &Error{Code: EUNAUTHORIZED, Message: "The bearer token is not valid."}
	// ErrTokenExpired: a bearer token past its expiry (TOKEN_TTL after it was issued).
	ErrTokenExpired = Declare(&Error{Type: problem.TokenExpired, Message: "The bearer token has expired. Get a new one from POST /api/v1/tokens."})
	// ErrTokenRevoked: a bearer token revoked by DELETE /api/v1/tokens/current.
	ErrTokenRevoked = Declare(&Error{Type: problem.TokenRevoked, Message: "The bearer token was revoked. Get a new one from POST /api/v1/tokens."})
	// ErrNotFound: the thing does not exist or belongs to someone else.
	ErrNotFound = Declare(&Error{Type: problem.NotFound, Message: "Not found.",
		Shopper: Words{Heading: "Page not found", Text: "There is no such page, or it belongs to another account."}})
)

// IsUnstorableText reports a database refusing a text value as such: on
// PostgreSQL a NUL character, or bytes that are not UTF-8 (SQLSTATE 22021).
// Such input is the client's mistake, to be answered 400, not 500.
func IsUnstorableText(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22021" // character_not_in_repertoire
}

// ErrForbidden: the caller is known, but not allowed to do this (a
// shopper asking for what only staff may do). Not final: nothing began.
var ErrForbidden = Declare(&Error{Type: problem.Forbidden, Message: "Only the shop's staff may do this.",
	Shopper: Words{Heading: "Not allowed", Text: "Only the shop's staff may do this; nothing was done."}})
