package models

import (
	"slices"
	"time"
)

// State is where a request stands with the provider: in doubt from the
// moment it is written, before the provider is called, until the provider
// answers; then succeeded, declined (a charge), pending (a refund: money on
// its way back), or failed (nothing was done, and nothing will be under its
// key); or excess (below). A charge may also wait for the shopper to
// authenticate (requires action): neither paid nor failed, it holds its
// order as a request in doubt does, until the provider says how it ended.
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
	// RequiresAction is a charge the provider answered by asking the
	// shopper to authenticate (3-D Secure): it ends on the shopper's
	// completion or failure, or the authentication's expiry.
	RequiresAction State = "requires_action"
)

// OpenStates are the states of a request whose outcome is still to come: no
// other request of its kind may be written for the order while one is.
var OpenStates = []State{InDoubt, RequiresAction}

// Open reports whether a request in the state may still end otherwise.
func (s State) Open() bool { return slices.Contains(OpenStates, s) }

// Request is what a payment attempt and a refund share: one request sent,
// or about to be sent, to the provider under ProviderKey, committed with
// the order's hold before the call, so that a crash, a lost reply or a lost
// database link never leaves money moved that the shop does not know about.
type Request struct {
	ID      string `gorm:"primaryKey;size:36"`
	OrderID string `gorm:"size:36;not null;index"`
	// DerivedKey is the operation's (middleware.DerivedKey); ProviderKey
	// the key the provider is called with: the derived key, numbered after
	// requests the provider refused, so that a request with other
	// parameters never reuses a key the provider has seen.
	DerivedKey  string `gorm:"size:80;not null;index"`
	ProviderKey string `gorm:"size:90;not null;uniqueIndex"`
	State       State  `gorm:"size:16;not null;index"`
	// SentAt is when the request was last sent: a lookup that finds nothing
	// proves nothing until every request sent has ended (see billing's
	// roll-forward window).
	SentAt    *time.Time
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// Base is the part of a row that every request shares.
func (r Request) Base() Request { return r }

// LastSent is when the request was last sent: its creation when no send
// was recorded (a row made before SentAt existed).
func (r Request) LastSent() time.Time {
	if r.SentAt != nil {
		return *r.SentAt
	}
	return r.CreatedAt
}
