package middleware

import "time"

// Key states, as the column holds them (released is in progress, no owner).
const (
	KeyInProgress = "in_progress"
	KeyCompleted  = "completed"
)

// IdempotencyKey is what the server remembers of one operation: who owns it
// while it runs (the lease), and the answer to replay once it is done. Only
// the middleware writes it; its (Scope, Key) index makes two claims impossible.
type IdempotencyKey struct {
	ID    uint   `gorm:"primaryKey"`
	Scope string `gorm:"size:64;not null;uniqueIndex:idx_idempotency_scope_key,priority:1"`
	Key   string `gorm:"column:key;size:255;not null;uniqueIndex:idx_idempotency_scope_key,priority:2"`
	// OperationID, kept when a retry takes over, makes the derived key.
	OperationID string `gorm:"size:36;not null"`
	Method      string `gorm:"size:10;not null"`
	Route       string `gorm:"size:255;not null"`
	Fingerprint string `gorm:"size:64;not null"`
	RawDigest   []byte // digester.raw of the request that claimed the key
	// Target is what a retry of a released key may not change (TargetOf).
	Target           string    `gorm:"size:64;not null;default:''"`
	State            string    `gorm:"size:16;not null"`
	OwnerToken       string    `gorm:"size:36;not null"`
	LockedUntil      time.Time `gorm:"not null"`
	Status           int       `gorm:"not null;default:0"`
	Headers          string    `gorm:"type:text"`
	Body             []byte
	Replays          int       `gorm:"not null;default:0"`
	CreatedAt        time.Time `gorm:"not null"`
	ExpiresAt        time.Time `gorm:"not null;index"`
	plainFingerprint string    // under a DigestKey, the unkeyed one older rows hold; never stored
}

// Released: in progress, but nobody holds it.
func (r IdempotencyKey) Released() bool { return r.State == KeyInProgress && r.OwnerToken == "" }

// Lapsed: in progress, and released or its lease passed.
func (r IdempotencyKey) Lapsed(now time.Time) bool {
	return r.Released() || r.State == KeyInProgress && !r.LockedUntil.After(now)
}
