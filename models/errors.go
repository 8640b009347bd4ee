package models

import (
	"cmp"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/shop/shop/problem"
)

// Code is the kind of an Error without a problem type of its own.
type Code string

const (
	EINVALID      Code = "invalid"      // the input breaks a rule: 422
	ENOTFOUND     Code = "not_found"    // missing, or not the caller's: 404
	ECONFLICT     Code = "conflict"     // the state forbids it: 409
	EUNAUTHORIZED Code = "unauthorized" // who is asking is unknown: 401
)

// Error is a failure the client can act on; anything else is internal. A
// named error says where it is declared all that is told of it but its
// words, which the HTTP layer keeps by its Name.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	Type    problem.Type // the zero Type answers by Code
	Name    string       // tells it from the other errors of its Type; "" is the Type's slug
	// Final: execution began and the same request would get this answer
	// again, so it is stored and replayed for its key, not released.
	Final      bool
	RetryAfter int        // seconds, when set
	Payment    *Payment   // the declined payment of a payment-declined answer
	Shortages  []Shortage // the lines an out-of-stock answer could not cover
}

// Shortage is a line of an order that stock cannot cover: Left units of
// the product, Asked for.
type Shortage struct {
	ProductID string
	Name      string
	Left      int
	Asked     int
}

type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return cmp.Or(e.Type.Slug, string(e.Code)) + ": " + e.Message }

// With is the error with another message, as when the bank says why it declined.
func (e *Error) With(message string) *Error {
	again := *e
	again.Message = message
	return &again
}

// ForNow is the error, not final: the same request may get another answer later.
func (e *Error) ForNow() *Error {
	again := *e
	again.Final = false
	return &again
}

// Invalid returns an EINVALID error listing the fields at fault.
func Invalid(fields ...FieldError) *Error {
	return &Error{Code: EINVALID, Message: "The request has invalid fields.", Fields: fields}
}

// DeclinedError is the answer to a declined payment, with the bank's reason.
func DeclinedError(p Payment) *Error {
	e := ErrPaymentDeclined.With(p.DeclineReason)
	e.Payment = &p
	return e
}

// declared are the named errors, so that a problem type's finality can be
// found from the type.
var declared []*Error

// Declare records a named error, once, where it is defined.
func Declare(e *Error) *Error {
	declared = append(declared, e)
	return e
}

// Declared is a named error of the problem type at uri, or nil: the named
// errors of a type are all final or none (models/declared_test.go).
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

// The named errors of the domain. Those not final may get another answer
// later: nothing was done, and the state that refused may change.
var (
	ErrOrderPaid          = Declare(&Error{Type: problem.OrderPaid, Final: true, Message: "This order is already paid."})
	ErrPaidNotCancellable = Declare(&Error{Type: problem.OrderPaid, Name: "paid-not-cancellable", Final: true, Message: "This order is paid, so it cannot be cancelled: refund it instead."})
	ErrOrderCancelled     = Declare(&Error{Type: problem.OrderCancelled, Final: true, Message: "This order was cancelled, so it cannot be paid; nothing was charged."})
	ErrPaymentDeclined    = Declare(&Error{Type: problem.PaymentDeclined, Final: true, Message: "Your card was declined."})
	// ErrRefundExceeds counts the refunds made and in progress.
	ErrRefundExceeds = Declare(&Error{Type: problem.RefundExceeds, Final: true, Message: "The amount is more than what can still be refunded on this order."})
	ErrRefundFailed  = Declare(&Error{Type: problem.RefundFailed, Final: true, Message: "The refund could not be sent to the card."})
	ErrOrderNotPaid  = Declare(&Error{Type: problem.OrderNotPaid, Message: "This order is not paid, so there is nothing to refund."})

	ErrPaymentInProgress = Declare(&Error{Type: problem.PaymentInProgress, RetryAfter: 1, Message: "Another payment of this order is in progress; retry shortly."})
	// ErrPaymentInDoubt: the order cannot be charged again until its last
	// payment is confirmed, by the next payment of the order or the reconciler.
	ErrPaymentInDoubt       = Declare(&Error{Type: problem.PaymentInProgress, Name: "payment-in-doubt", RetryAfter: 1, Message: "The last payment of this order is being confirmed with the payment provider; nothing more was charged. Try again in a moment."})
	ErrPaymentAwaiting      = Declare(&Error{Type: problem.PaymentInProgress, Name: "payment-awaiting", RetryAfter: 1, Message: "The last payment of this order waits for the cardholder to authenticate it; nothing more was charged. Retry once it has ended."})
	ErrRefundInDoubt        = Declare(&Error{Type: problem.PaymentInProgress, Name: "refund-in-doubt", RetryAfter: 1, Message: "The last refund of this order is being confirmed with the payment provider; nothing more was refunded. Try again in a moment."})
	ErrOutOfStock           = Declare(&Error{Type: problem.OutOfStock, Message: "There is not enough in stock for this order; nothing was ordered."})
	ErrTooManyPendingOrders = Declare(&Error{Type: problem.TooManyPendingOrders, Message: "You have too many unpaid orders; nothing was ordered. Pay or cancel one of them first."})
	ErrEmailTaken           = Declare(&Error{Type: problem.EmailTaken, Message: "An account with this email already exists."})
	// ErrBadCredentials: wrong email or password, or an unknown token.
	ErrBadCredentials = Declare(&Error{Type: problem.BadCredentials, Message: "The email or password is wrong."})
	// ErrBadToken: a bearer token this server never issued.
	ErrBadToken = &Error{Code: EUNAUTHORIZED, Message: "The bearer token is not valid."}
	// ErrTokenExpired: TOKEN_TTL after it was issued.
	ErrTokenExpired = Declare(&Error{Type: problem.TokenExpired, Message: "The bearer token has expired. Get a new one from POST /api/v1/tokens."})
	ErrTokenRevoked = Declare(&Error{Type: problem.TokenRevoked, Message: "The bearer token was revoked. Get a new one from POST /api/v1/tokens."})
	// ErrNotFound: missing, or someone else's.
	ErrNotFound = Declare(&Error{Type: problem.NotFound, Message: "Not found."})
	// ErrForbidden: a shopper asking for what only staff may do.
	ErrForbidden = Declare(&Error{Type: problem.Forbidden, Message: "Only the shop's staff may do this."})
)

// NotFoundAs is err, with GORM's "no such row" told as missing, the caller's error for it.
func NotFoundAs(err, missing error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return missing
	}
	return err
}

// IsUnstorableText reports PostgreSQL refusing a text value (a NUL, or
// bytes not UTF-8: SQLSTATE 22021): the client's mistake, not the server's.
func IsUnstorableText(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22021" // character_not_in_repertoire
}
