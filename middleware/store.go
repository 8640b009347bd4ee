package middleware

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"gorm.io/gorm"
)

// storedResponse is the answer kept for replay.
type storedResponse struct {
	Status  int
	Headers http.Header
	Body    []byte
}

// store holds the SQL of the key lifecycle; the middleware reads and writes
// the table through here only. Every statement that changes ownership is a
// single statement guarded by the (scope, key) unique index or by the
// owner token: nothing checks and then acts.
type store struct {
	db *gorm.DB
}

// on is the store on a transaction: its statements run in tx.
func (s store) on(tx *gorm.DB) store { return store{db: tx} }

// keyColumns are the columns of a key row, in the order find scans them.
const keyColumns = `id, scope, "key", operation_id, method, route, fingerprint, raw_digest, target, state,
  owner_token, locked_until, status, headers, body, replays, created_at, expires_at`

// find reads the key row. It is scanned by hand, not by GORM's reflection
// (the larger part of a cold replay's allocations).
func (s store) find(ctx context.Context, scope, key string) (IdempotencyKey, bool, error) {
	row := s.db.WithContext(ctx).Raw(`SELECT `+keyColumns+` FROM idempotency_keys WHERE scope = ? AND "key" = ?`, scope, key).Row()
	var k IdempotencyKey
	var headers sql.NullString
	err := row.Scan(&k.ID, &k.Scope, &k.Key, &k.OperationID, &k.Method, &k.Route, &k.Fingerprint, &k.RawDigest, &k.Target, &k.State,
		&k.OwnerToken, &k.LockedUntil, &k.Status, &headers, &k.Body, &k.Replays, &k.CreatedAt, &k.ExpiresAt)
	k.Headers = headers.String
	if errors.Is(err, sql.ErrNoRows) {
		return IdempotencyKey{}, false, nil
	}
	return k, err == nil, err
}

// page reads up to limit of a scope's keys, newest first, from after p
// (from the newest when p is nil), without the answers they keep.
func (s store) page(ctx context.Context, scope string, p *KeyPosition, limit int) ([]IdempotencyKey, error) {
	keys := []IdempotencyKey{}
	q := s.db.WithContext(ctx).Omit("body", "headers").Where("scope = ?", scope)
	if p != nil {
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", p.CreatedAt, p.CreatedAt, p.ID)
	}
	err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&keys).Error
	return keys, err
}

// claim inserts the key as in progress, or takes over an expired one as a new
// operation. It reports whether this caller now owns the key.
func (s store) claim(ctx context.Context, k IdempotencyKey) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`INSERT INTO idempotency_keys
  (scope, "key", operation_id, method, route, fingerprint, raw_digest, target, state, owner_token, locked_until, status, replays, created_at, expires_at)
VALUES (@scope, @key, @operation, @method, @route, @fingerprint, @digest, @target, @state, @owner, @locked, 0, 0, @now, @expires)
ON CONFLICT (scope, "key") DO UPDATE SET
  operation_id = excluded.operation_id, method = excluded.method, route = excluded.route,
  fingerprint = excluded.fingerprint, raw_digest = excluded.raw_digest, target = excluded.target, state = excluded.state, owner_token = excluded.owner_token,
  locked_until = excluded.locked_until, status = 0, headers = NULL, body = NULL, replays = 0,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE `+claimFence,
		sql.Named("scope", k.Scope), sql.Named("key", k.Key), sql.Named("operation", k.OperationID), sql.Named("method", k.Method),
		sql.Named("route", k.Route), sql.Named("fingerprint", k.Fingerprint), sql.Named("digest", k.RawDigest), sql.Named("target", k.Target),
		sql.Named("state", KeyInProgress), sql.Named("owner", k.OwnerToken), sql.Named("locked", k.LockedUntil),
		sql.Named("now", k.CreatedAt), sql.Named("expires", k.ExpiresAt))
	return res.RowsAffected == 1, res.Error
}

// owned runs stmt (an UPDATE's head, or a DELETE) on the key row only while
// k's owner holds it in progress, and reports whether it did: the one fence of
// every statement after the claim. An attempt whose lease was taken over
// changes nothing.
func owned(db *gorm.DB, stmt string, k IdempotencyKey, args ...any) (bool, error) {
	args = append(args, k.Scope, k.Key, k.OwnerToken, KeyInProgress)
	res := db.Exec(stmt+` WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`, args...)
	return res.RowsAffected == 1, res.Error
}

// takeover hands an operation nobody holds (its lease passed, or it was
// released) from previousOwner to a retry, unless another retry took it
// first. The operation id stays, so the re-run is the same operation to
// everything downstream; the request becomes the retry's, which may differ
// only after a release.
func (s store) takeover(ctx context.Context, want IdempotencyKey, previousOwner string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE idempotency_keys
SET owner_token = ?, locked_until = ?, method = ?, route = ?, fingerprint = ?, raw_digest = ?
WHERE scope = ? AND "key" = ? AND state = ? AND owner_token = ? AND locked_until <= ?`,
		want.OwnerToken, want.LockedUntil, want.Method, want.Route, want.Fingerprint, want.RawDigest,
		want.Scope, want.Key, KeyInProgress, previousOwner, now)
	return res.RowsAffected == 1, res.Error
}

// extend moves the lease of a running operation forward.
func (s store) extend(ctx context.Context, k IdempotencyKey, until time.Time) (bool, error) {
	return owned(s.db.WithContext(ctx), `UPDATE idempotency_keys SET locked_until = ?`, k, until)
}

// complete records the answer. It runs in the handler's transaction when
// there is one, so the answer commits with the writes.
func (s store) complete(k IdempotencyKey, resp storedResponse) (bool, error) {
	headers, err := json.Marshal(resp.Headers)
	if err != nil {
		return false, err
	}
	return owned(s.db, `UPDATE idempotency_keys SET state = ?, status = ?, headers = ?, body = ?`, k,
		KeyCompleted, resp.Status, string(headers), resp.Body)
}

// release gives up an operation that kept no answer: no owner, lease
// over, so that the next request with the key takes it over at once. The
// row stays so that the operation id, and with it the derived key,
// survives: a retry gets the provider's first answer, not a second charge.
// With forget, the row is deleted instead.
func (s store) release(ctx context.Context, k IdempotencyKey, now time.Time, forget bool) (bool, error) {
	if forget {
		return owned(s.db.WithContext(ctx), `DELETE FROM idempotency_keys`, k)
	}
	return owned(s.db.WithContext(ctx), `UPDATE idempotency_keys SET owner_token = '', locked_until = ?`, k, now)
}

// claimableSQL is claimable in SQL, for a row of idempotency_keys at the
// moment @now: expired, and completed or its lease over. The claim is
// fenced by it (claimFence, in fence.go) and the sweep deletes by it.
const claimableSQL = `idempotency_keys.expires_at <= @now AND (idempotency_keys.state = '` + KeyCompleted +
	`' OR idempotency_keys.locked_until <= @now)`

// sweep deletes up to batch expired keys and returns the route of each.
// The outer conditions repeat the inner ones so that a key claimed again
// meanwhile is not deleted.
func (s store) sweep(ctx context.Context, now time.Time, batch int) ([]string, error) {
	var routes []string
	err := s.db.WithContext(ctx).Raw(`DELETE FROM idempotency_keys
WHERE id IN (SELECT id FROM idempotency_keys WHERE `+claimableSQL+` LIMIT @batch)
  AND `+claimableSQL+`
RETURNING route`,
		sql.Named("now", now), sql.Named("batch", batch)).Scan(&routes).Error
	return routes, err
}
