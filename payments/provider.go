// Package payments talks to the card provider: one Provider interface, met by
// Stripe and by a simulation that behaves like it in test mode.
package payments

import (
	"context"
	"errors"
	"time"

	"github.com/shop/shop/models"
)

// Test payment methods: Stripe's test PaymentMethod ids, which the
// simulation answers the way Stripe's test mode does, and two of the
// simulation's own.
const (
	MethodVisa              = "pm_card_visa"                            // succeeds
	MethodMastercard        = "pm_card_mastercard"                      // succeeds
	MethodChargeDeclined    = "pm_card_chargeDeclined"                  // declined by the issuer (Stripe's id)
	MethodInsufficientFunds = "pm_card_chargeDeclinedInsufficientFunds" // declined: insufficient funds
	MethodDeclined          = "pm_card_declined"                        // declined by the issuer (the simulation's older id)
	MethodUnavailable       = "pm_card_unavailable"                     // the provider fails transiently; Stripe knows no such method, and refuses it: nothing charged either way
	MethodRefundFail        = "pm_card_refundFail"                      // succeeds; its refunds fail, as if the card account were closed (Stripe's id)
	MethodAuthentication    = "pm_card_authenticationRequired"          // asks the shopper to authenticate (3-D Secure), then succeeds or fails as they answer (Stripe's id)
)

// SimulatedCards are the test cards the simulated provider knows, as the
// pay form offers them; StripeCards those of Stripe's test mode (it knows
// no card whose provider is down). The API accepts every one of Methods.
var (
	SimulatedCards = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodUnavailable, MethodRefundFail, MethodAuthentication}
	StripeCards    = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodRefundFail, MethodAuthentication}
)

// Methods lists the payment methods the shop accepts.
var Methods = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodDeclined, MethodUnavailable, MethodRefundFail, MethodAuthentication}

// ErrUnavailable is a passing refusal of this request before it charged
// anything (unavailable, rate limited, unauthorized): the same call may
// succeed later. For the first request under a key, nothing was charged
// under it; for a repeat, it says nothing about the earlier requests.
var ErrUnavailable = errors.New("payment provider unavailable")

// ErrRefused is a definitive refusal: the provider refused the request
// itself before executing it, and refuses every request with the same key
// and parameters the same way, so nothing was charged under the key and
// nothing ever will be — whichever request under it got the answer. An
// attempt refused so is settled as failed by whoever sent its request.
var ErrRefused = errors.New("payment provider refused the request")

// ChargeRequest asks for one charge. IdempotencyKey makes the call safe to
// repeat: the provider answers a repeat with the charge it already made.
type ChargeRequest struct {
	IdempotencyKey string
	OrderID        string
	AmountCents    int64
	Currency       string
	PaymentMethod  string
	// ReturnURL is where the provider sends the shopper back after an
	// authentication the card asks for.
	ReturnURL string
	// ChargeID is the provider's id of what the key made, once known: Find
	// reads it directly rather than searching.
	ChargeID string
}

// Charge is the provider's answer: succeeded, declined with a reason, or
// requires action — the shopper is to authenticate at NextActionURL.
type Charge struct {
	ID            string
	Status        models.State
	DeclineReason string
	NextActionURL string
}

// Expirer is a provider that keeps waiting for an authentication until
// told to stop (Stripe): Expire ends the charge under the key, and answers
// what became of it. The simulation expires its own.
type Expirer interface {
	Expire(ctx context.Context, req ChargeRequest) (Charge, error)
}

// authFailed and authExpired are why a charge that asked the shopper to
// authenticate was declined.
const (
	authFailed  = "The card's authentication failed."
	authExpired = "The card's authentication was not completed in time."
)

// Provider charges payment methods, and looks up what it did under a key.
//
// Charge sends a request; repeated under its key, it gets the first
// request's answer, or charges once if the first never arrived — until the
// provider forgets the key (KeyLifetime), after which a repeat may be taken
// as new. Find looks up, without charging, the charge made under the
// request's key: found is false when the provider shows nothing — proof
// that nothing was charged only once any request under the key has long
// ended (a provider's search may lag).
//
// Refund and FindRefund do the same for refunds of a charge.
type Provider interface {
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
	Find(ctx context.Context, req ChargeRequest) (charge Charge, found bool, err error)
	Refund(ctx context.Context, req RefundRequest) (RefundAnswer, error)
	FindRefund(ctx context.Context, req RefundRequest) (refund RefundAnswer, found bool, err error)
	KeyLifetime() time.Duration
}

// RefundRequest asks for one refund of a charge, under IdempotencyKey.
type RefundRequest struct {
	IdempotencyKey string
	ChargeID       string
	OrderID        string
	AmountCents    int64
	Currency       string
}

// RefundAnswer is the provider's answer: succeeded, pending (on its way
// to the card), or failed with a reason (nothing given back).
type RefundAnswer struct {
	ID            string
	State         models.State
	FailureReason string
}
