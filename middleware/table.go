package middleware

import "time"

// Idempotency key states, as the column holds them. A third state, released,
// is in progress with no owner: see IdempotencyKey.Released.
const (
	KeyInProgress = "in_progress"
	KeyCompleted  = "completed"
)

// IdempotencyKey is what the server remembers of one operation: who owns it
// while it runs (the lease), and the answer to replay once it is done. The
// middleware owns the table and writes it only through its own SQL; an
// application may read it, to show a user's activity.
//
// (Scope, Key) is unique: the index idx_idempotency_scope_key is what makes
// two claims of one key impossible, on every instance at once.
type IdempotencyKey struct {
	ID    uint   `gorm:"primaryKey"`
	Scope string `gorm:"size:64;not null;uniqueIndex:idx_idempotency_scope_key,priority:1"`
	Key   string `gorm:"column:key;size:255;not null;uniqueIndex:idx_idempotency_scope_key,priority:2"`
	// OperationID is new for each operation the key names, and kept when a
	// retry takes over a stalled lease: the derived key comes from it, so a
	// re-run is the same operation to the provider, and a key reused after
	// it expired is a new one.
	OperationID string `gorm:"size:36;not null"`
	Method      string `gorm:"size:10;not null"`
	Route       string `gorm:"size:255;not null"`
	Fingerprint string `gorm:"size:64;not null"`
	// RawDigest hashes the request that claimed or took over the key as it
	// came, byte for byte (the middleware's rawDigest): a retry with the
	// same digest has the same fingerprint, so an instance replaying the
	// answer need not canonicalise its body. Empty on rows older than it.
	RawDigest []byte
	// Target is the part of the fingerprint a retry of a released key may
	// not change: method, route and path parameters. The body and query may
	// be corrected; the operation, and its derived key, stay about the same
	// thing (the same order, say).
	Target      string    `gorm:"size:64;not null;default:''"`
	State       string    `gorm:"size:16;not null"`
	OwnerToken  string    `gorm:"size:36;not null"`
	LockedUntil time.Time `gorm:"not null"`
	Status      int       `gorm:"not null;default:0"`
	Headers     string    `gorm:"type:text"`
	Body        []byte
	Replays     int       `gorm:"not null;default:0"`
	CreatedAt   time.Time `gorm:"not null"`
	ExpiresAt   time.Time `gorm:"not null;index"`
	// plainFingerprint is, on a request read under a DigestKey, its
	// fingerprint without the key: what a row from before the key holds
	// (digest.go). Never stored.
	plainFingerprint string
}

// Released: in progress, but nobody holds it — the last attempt ended
// without an answer worth keeping, and the next request takes it over.
func (r IdempotencyKey) Released() bool { return r.State == KeyInProgress && r.OwnerToken == "" }

// Lapsed: in progress, but its lease has passed, so nobody holds it — it was
// released, or its attempt died or failed to release it. The next request
// with the key takes it over, as it would a released one.
func (r IdempotencyKey) Lapsed(now time.Time) bool {
	return r.Released() || r.State == KeyInProgress && !r.LockedUntil.After(now)
}
