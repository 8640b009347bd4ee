package models

import (
	"slices"
	"time"
)

// State is where a request stands with the provider: in doubt from before the
// call until it answers; then succeeded, declined (a charge), pending (a refund
// on its way), failed (nothing done, nor ever under its key), or excess.
type State string

const (
	InDoubt   State = "in_doubt"
	Succeeded State = "succeeded"
	Declined  State = "declined"
	Pending   State = "pending"
	Failed    State = "failed"
	// Excess is a refund the provider made of a charge already given back
	// in full: money given back twice, for staff to recover, not counted.
	Excess State = "excess"
	// RequiresAction: the shopper must authenticate (3-D Secure) until
	// they complete or fail it, or it expires.
	RequiresAction State = "requires_action"
)

// OpenStates are those of a request whose outcome is to come: no other
// request of its kind may be written for the order meanwhile.
var OpenStates = []State{InDoubt, RequiresAction}

// Open reports whether a request in the state may still end otherwise.
func (s State) Open() bool { return slices.Contains(OpenStates, s) }

// Request is what a payment attempt and a refund share: one request to the
// provider under ProviderKey, committed with the order's hold before the call,
// so that no crash or lost reply leaves money moved the shop does not know of.
type Request struct {
	ID      string `gorm:"primaryKey;size:36"`
	OrderID string `gorm:"size:36;not null;index"`
	// DerivedKey is the operation's; ProviderKey is it numbered after refused
	// requests, so that other parameters never reuse a key the provider has seen.
	DerivedKey  string `gorm:"size:80;not null;index"`
	ProviderKey string `gorm:"size:90;not null;uniqueIndex"`
	State       State  `gorm:"size:16;not null;index"`
	// SentAt is when the request was last sent: a lookup that finds nothing
	// proves nothing until every request sent has ended.
	SentAt    *time.Time
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

func (r Request) Base() Request { return r }

// LastSent is SentAt, or the creation of a row from before SentAt.
func (r Request) LastSent() time.Time {
	if r.SentAt != nil {
		return *r.SentAt
	}
	return r.CreatedAt
}

// PaymentAttempt is one charge request; one in doubt is resolved by sending it
// again under its own key. Succeeded and declined ones have a Payment.
type PaymentAttempt struct {
	Request
	AmountCents      int64  `gorm:"not null"`
	Currency         string `gorm:"size:3;not null"`
	PaymentMethod    string `gorm:"size:64;not null"`
	ProviderChargeID string `gorm:"size:64"`
	DeclineReason    string `gorm:"size:200"`
}

func (PaymentAttempt) TableName() string { return "payment_attempts" }

// PaymentAction is where the shopper authenticates an attempt that requires
// action, and until when (the order's hold lasts as long).
type PaymentAction struct {
	ProviderKey string    `gorm:"primaryKey;size:90"`
	URL         string    `gorm:"size:2048;not null"`
	ExpiresAt   time.Time `gorm:"not null"`
}

// Refund is one refund of an order's charge, resolved under its own key
// before another refund of the order is sent: their sum never exceeds it.
type Refund struct {
	Request
	PaymentID        string  `gorm:"size:36;not null"`
	ChargeID         string  `gorm:"size:64;not null"`
	AmountCents      int64   `gorm:"not null"`
	Currency         string  `gorm:"size:3;not null"`
	Reason           string  `gorm:"size:200"`
	ProviderRefundID string  `gorm:"size:64"`
	FailureReason    string  `gorm:"size:200"`
	CreatedBy        *string `gorm:"size:36;-:migration"` // the staff user; nil before it was recorded
}

func (Refund) TableName() string { return "refunds" }
