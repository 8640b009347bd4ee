// Package payments is the client side of the payment provider: an interface,
// and a simulated provider that behaves like a real one in test mode.
package payments

import (
	"context"
	"errors"
	"time"
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
)

// Methods lists the payment methods the shop accepts.
var Methods = []string{MethodVisa, MethodMastercard, MethodChargeDeclined, MethodInsufficientFunds, MethodDeclined, MethodUnavailable}

// ErrUnavailable is a refusal of this request before it charged anything
// (unavailable, rate limited, unauthorized): the same call may succeed
// later. For the first request under a key, nothing was charged under it;
// for a repeat, it says nothing about the earlier requests.
var ErrUnavailable = errors.New("payment provider unavailable")

// ChargeRequest asks for one charge. IdempotencyKey makes the call safe to
// repeat: the provider answers a repeat with the charge it already made.
type ChargeRequest struct {
	IdempotencyKey string
	OrderID        string
	AmountCents    int64
	Currency       string
	PaymentMethod  string
}

// Charge is the provider's answer: succeeded, or declined with a reason.
type Charge struct {
	ID            string
	Status        string // "succeeded" or "declined"
	DeclineReason string
}

// Provider charges payment methods.
type Provider interface {
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
}

// Finder is a provider whose idempotency keys expire: past KeyLifetime a
// repeated request may be taken as new and charge again, so what it did
// under a key is looked up instead. found is false when it shows nothing
// (yet: a provider's search may lag) — never proof that nothing was charged.
type Finder interface {
	Provider
	Find(ctx context.Context, req ChargeRequest) (charge Charge, found bool, err error)
	KeyLifetime() time.Duration
}
