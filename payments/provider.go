// Package payments talks to the card provider: one Provider interface, met by
// Stripe and by a simulation that behaves like it in test mode.
package payments

import (
	"context"
	"errors"
	"time"

	"github.com/shop/shop/models"
)

// Test payment methods: Stripe's, which the simulation answers as Stripe's
// test mode does, and two of the simulation's own.
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

// The pay form's test cards, for the simulation and for Stripe (which knows
// no card whose provider is down); the API accepts every one of Methods.
var (
	SimulatedCards = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodUnavailable, MethodRefundFail, MethodAuthentication}
	StripeCards    = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodRefundFail, MethodAuthentication}
	Methods        = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodDeclined, MethodUnavailable, MethodRefundFail, MethodAuthentication}
)

var (
	// ErrUnavailable is a passing refusal of this request before it did
	// anything; it says nothing about earlier requests under the key.
	ErrUnavailable = errors.New("payment provider unavailable")
	// ErrRefused is a definitive refusal, alike for every request with the
	// same key and parameters: nothing was or ever will be done under it.
	ErrRefused = errors.New("payment provider refused the request")
)

// ChargeRequest asks for one charge, under IdempotencyKey; ChargeID, once
// known, lets Find read the charge rather than search.
type ChargeRequest struct {
	IdempotencyKey, OrderID string
	AmountCents             int64
	Currency, PaymentMethod string
	ReturnURL, ChargeID     string
}

// Charge is the provider's answer: succeeded, declined, or requires action.
type Charge struct {
	ID                           string
	Status                       models.State
	DeclineReason, NextActionURL string
}

// Expirer is a provider that waits for an authentication until told to stop
// (Stripe): Expire ends the charge, and answers what became of it.
type Expirer interface {
	Expire(ctx context.Context, req ChargeRequest) (Charge, error)
}

// Why a charge that asked the shopper to authenticate was declined.
const (
	authFailed  = "The card's authentication failed."
	AuthExpired = "The card's authentication was not completed in time."
)

// Provider charges and refunds, and looks up what it did under a key. A
// repeat under a key gets the first answer, or is carried out once if the
// first never arrived, until the provider forgets the key (KeyLifetime).
// Not found proves nothing was done only once every request under the key
// has long ended (a search may lag).
type Provider interface {
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
	Find(ctx context.Context, req ChargeRequest) (charge Charge, found bool, err error)
	Refund(ctx context.Context, req RefundRequest) (RefundAnswer, error)
	FindRefund(ctx context.Context, req RefundRequest) (refund RefundAnswer, found bool, err error)
	KeyLifetime() time.Duration
}

// RefundRequest asks for one refund of a charge, under IdempotencyKey.
type RefundRequest struct {
	IdempotencyKey, ChargeID, OrderID string
	AmountCents                       int64
	Currency                          string
}

// RefundAnswer is the provider's answer: succeeded, pending, or failed
// with a reason (nothing given back).
type RefundAnswer struct {
	ID, FailureReason string
	State             models.State
}
