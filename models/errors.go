package models

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Code says what kind of failure an Error is; one renderer maps it to a status.
type Code string

const (
	EINVALID      Code = "invalid"      // the input breaks a rule: 422
	ENOTFOUND     Code = "not_found"    // missing, or not the caller's: 404
	ECONFLICT     Code = "conflict"     // the state forbids it: 409
	EUNAUTHORIZED Code = "unauthorized" // who is asking is unknown: 401
	EUNAVAILABLE  Code = "unavailable"  // a service the request needs did not do its part: 502
)

// Error is a failure the client can act on. Anything else is internal.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
}

// FieldError names one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Invalid returns an EINVALID error listing the fields at fault.
func Invalid(fields ...FieldError) *Error {
	return &Error{Code: EINVALID, Message: "The request has invalid fields.", Fields: fields}
}

var (
	// ErrOrderPaid: the order is already paid. A final answer: the same
	// request will always get it.
	ErrOrderPaid = &Error{Code: ECONFLICT, Message: "This order is already paid."}
	// ErrPaymentInProgress: another payment of the order is running. Not
	// final: retry once it has finished.
	ErrPaymentInProgress = &Error{Code: ECONFLICT, Message: "Another payment of this order is in progress; retry shortly."}
	// ErrEmailTaken: sign up with an address that already has an account.
	ErrEmailTaken = &Error{Code: ECONFLICT, Message: "An account with this email already exists."}
	// ErrBadCredentials: wrong email or password, or an unknown token.
	ErrBadCredentials = &Error{Code: EUNAUTHORIZED, Message: "The email or password is wrong."}
	// ErrBadToken: a bearer token this server never issued.
	ErrBadToken = &Error{Code: EUNAUTHORIZED, Message: "The bearer token is not valid."}
	// ErrTokenExpired: a bearer token past its expiry (TOKEN_TTL after it was issued).
	ErrTokenExpired = &Error{Code: EUNAUTHORIZED, Message: "The bearer token has expired. Get a new one from POST /api/v1/tokens."}
	// ErrTokenRevoked: a bearer token revoked by DELETE /api/v1/tokens/current.
	ErrTokenRevoked = &Error{Code: EUNAUTHORIZED, Message: "The bearer token was revoked. Get a new one from POST /api/v1/tokens."}
	// ErrNotFound: the thing does not exist or belongs to someone else.
	ErrNotFound = &Error{Code: ENOTFOUND, Message: "Not found."}
)

// IsUnstorableText reports a database refusing a text value as such: on
// PostgreSQL a NUL character, or bytes that are not UTF-8 (SQLSTATE 22021).
// Such input is the client's mistake, to be answered 400, not 500.
func IsUnstorableText(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22021" // character_not_in_repertoire
}

// ErrPaymentInDoubt: an earlier payment of the order reached the provider
// and its outcome is not known yet. Not final: nothing was charged by this
// request, and the order cannot be charged again until that payment is
// confirmed, by the next payment of the order or the reconciler.
var ErrPaymentInDoubt = &Error{Code: ECONFLICT, Message: "The last payment of this order is being confirmed with the payment provider; nothing more was charged. Try again in a moment."}

var (
	// ErrOrderCancelled: the order was cancelled; it cannot be paid. Final.
	ErrOrderCancelled = &Error{Code: ECONFLICT, Message: "This order was cancelled, so it cannot be paid; nothing was charged."}
	// ErrOrderNotPaid: a refund of an order that was never charged. Final.
	ErrOrderNotPaid = &Error{Code: ECONFLICT, Message: "This order is not paid, so there is nothing to refund."}
	// ErrRefundExceeds: a refund of more than is still refundable,
	// refunds already made or in progress counted. Final.
	ErrRefundExceeds = &Error{Code: ECONFLICT, Message: "The amount is more than what can still be refunded on this order."}
)
