package middleware

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"
)

// Key states.
const (
	StateInProgress = "in_progress"
	StateCompleted  = "completed"
)

// IdempotencyKey is what the server remembers of one operation: who owns it
// while it runs (the lease), and the answer to replay once it is done.
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
}

// storedResponse is the answer kept for replay.
type storedResponse struct {
	Status  int
	Headers http.Header
	Body    []byte
}

// store holds the SQL of the key lifecycle. Every statement that changes
// ownership is a single atomic statement guarded by the (scope, key) unique
// index or by the current owner token; nothing checks and then acts.
type store struct {
	db *gorm.DB
}

func (s store) find(ctx context.Context, scope, key string) (IdempotencyKey, bool, error) {
	var rows []IdempotencyKey
	// Raw SQL: the same indexed read, without building the condition from a
	// struct on every request.
	err := s.db.WithContext(ctx).Raw(`SELECT * FROM idempotency_keys WHERE scope = ? AND "key" = ? LIMIT 1`, scope, key).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return IdempotencyKey{}, false, err
	}
	return rows[0], true, nil
}

// claim inserts the key as in progress, or takes over an expired one as a new
// operation. It reports whether this caller now owns the key.
func (s store) claim(ctx context.Context, k IdempotencyKey) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`INSERT INTO idempotency_keys
  (scope, "key", operation_id, method, route, fingerprint, target, state, owner_token, locked_until, status, replays, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)
ON CONFLICT (scope, "key") DO UPDATE SET
  operation_id = excluded.operation_id, method = excluded.method, route = excluded.route,
  fingerprint = excluded.fingerprint, target = excluded.target, state = excluded.state, owner_token = excluded.owner_token,
  locked_until = excluded.locked_until, status = 0, headers = NULL, body = NULL, replays = 0,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE `+claimableSQL("idempotency_keys", "excluded.created_at"),
		k.Scope, k.Key, k.OperationID, k.Method, k.Route, k.Fingerprint, k.Target, StateInProgress, k.OwnerToken, k.LockedUntil,
		k.CreatedAt, k.ExpiresAt)
	return res.RowsAffected == 1, res.Error
}

// takeover hands an operation nobody holds — its lease passed, or it was
// released — from its previous owner to a retry. The operation id stays, so
// the re-run is the same operation to everything downstream; the request
// becomes the retry's, which may differ only after a release.
func (s store) takeover(ctx context.Context, want IdempotencyKey, previousOwner string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE idempotency_keys
SET owner_token = ?, locked_until = ?, method = ?, route = ?, fingerprint = ?
WHERE scope = ? AND "key" = ? AND state = ? AND owner_token = ? AND locked_until <= ?`,
		want.OwnerToken, want.LockedUntil, want.Method, want.Route, want.Fingerprint,
		want.Scope, want.Key, StateInProgress, previousOwner, now)
	return res.RowsAffected == 1, res.Error
}

// extend moves the lease of a running operation forward, fenced by the
// owner token: it reports false when the key is no longer this owner's.
func (s store) extend(ctx context.Context, scope, key, owner string, until time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE idempotency_keys SET locked_until = ?
WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`,
		until, scope, key, owner, StateInProgress)
	return res.RowsAffected == 1, res.Error
}

// complete records the answer, fenced by the owner token: an owner whose
// lease was taken over completes nothing. It runs in the handler's
// transaction when there is one, so the answer commits with the writes.
func (s store) complete(db *gorm.DB, scope, key, owner string, resp storedResponse) (bool, error) {
	headers, err := json.Marshal(resp.Headers)
	if err != nil {
		return false, err
	}
	res := db.Exec(`UPDATE idempotency_keys SET state = ?, status = ?, headers = ?, body = ?
WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`,
		StateCompleted, resp.Status, string(headers), resp.Body, scope, key, owner, StateInProgress)
	return res.RowsAffected == 1, res.Error
}

// release gives up an operation that ended without an answer worth
// keeping: no owner, lease over, so that the next request with the key —
// a retry, or a corrected request — takes it over at once. The row stays so
// that the operation id, and with it the derived key, survives: if the
// attempt reached the provider before failing, the retry gets the provider's
// first answer instead of a second charge. It reports false when the key was
// no longer this owner's.
func (s store) release(ctx context.Context, scope, key, owner string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE idempotency_keys SET owner_token = '', locked_until = ?
WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`,
		now, scope, key, owner, StateInProgress)
	return res.RowsAffected == 1, res.Error
}

// claimableSQL is claimable in SQL, for the key row named table at the
// moment now (an SQL expression): expired, and completed or its lease over.
func claimableSQL(table, now string) string {
	return fmt.Sprintf("%[1]s.expires_at <= %[2]s AND (%[1]s.state = '%[3]s' OR %[1]s.locked_until <= %[2]s)", table, now, StateCompleted)
}

// sweep deletes up to batch expired keys and returns the route of each.
// The outer conditions repeat the inner ones so that a key claimed again
// between the two is not deleted.
func (s store) sweep(ctx context.Context, now time.Time, batch int) ([]string, error) {
	var routes []string
	err := s.db.WithContext(ctx).Raw(`DELETE FROM idempotency_keys
WHERE id IN (SELECT id FROM idempotency_keys WHERE `+claimableSQL("idempotency_keys", "@now")+` LIMIT @batch)
  AND `+claimableSQL("idempotency_keys", "@now")+`
RETURNING route`,
		sql.Named("now", now), sql.Named("batch", batch)).Scan(&routes).Error
	return routes, err
}

// Released: in progress, but nobody holds it — the last attempt ended
// without an answer worth keeping, and the next request takes it over.
func (r IdempotencyKey) Released() bool { return r.State == StateInProgress && r.OwnerToken == "" }

// Lapsed: in progress, but its lease has passed, so nobody holds it — it was
// released, or its attempt died or failed to release it. The next request
// with the key takes it over, as it would a released one.
func (r IdempotencyKey) Lapsed(now time.Time) bool {
	return r.Released() || r.State == StateInProgress && !r.LockedUntil.After(now)
}

func (r IdempotencyKey) response() (storedResponse, error) {
	resp := storedResponse{Status: r.Status, Body: r.Body}
	err := json.Unmarshal([]byte(r.Headers), &resp.Headers)
	return resp, err
}
