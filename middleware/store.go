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
	Target      string    `gorm:"size:64;not null;default:''"`
	State       string    `gorm:"size:16;not null"`
	OwnerToken  string    `gorm:"size:36;not null"`
	LockedUntil time.Time `gorm:"not null"`
	Status      int       `gorm:"not null;default:0"`
	Headers     string    `gorm:"type:text"`
	Body        []byte
	// Replays, as listed (KeysPage), is the count of ReplayCount too; the column alone is
	// what a release before that table counted.
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

type storedResponse struct {
	Status  int
	Headers http.Header
	Body    []byte
}

// store holds all the key table's SQL. Every change of ownership is one statement
// guarded by the (scope, key) unique index or the owner token: nothing checks, then acts.
type store struct{ db *gorm.DB }

func (s store) on(tx *gorm.DB) store { return store{db: tx} }

const keyColumns = `id, scope, "key", operation_id, method, route, fingerprint, raw_digest, target, state,
  owner_token, locked_until, status, headers, body, created_at, expires_at`

// find reads the key row, scanned by hand (reflection cost cold replays).
func (s store) find(ctx context.Context, scope, key string) (IdempotencyKey, bool, error) {
	row := s.db.WithContext(ctx).Raw(`SELECT `+keyColumns+` FROM idempotency_keys WHERE scope = ? AND "key" = ?`, scope, key).Row()
	var k IdempotencyKey
	var headers sql.NullString
	err := row.Scan(&k.ID, &k.Scope, &k.Key, &k.OperationID, &k.Method, &k.Route, &k.Fingerprint, &k.RawDigest, &k.Target, &k.State,
		&k.OwnerToken, &k.LockedUntil, &k.Status, &headers, &k.Body, &k.CreatedAt, &k.ExpiresAt)
	k.Headers = headers.String
	if errors.Is(err, sql.ErrNoRows) {
		return IdempotencyKey{}, false, nil
	}
	return k, err == nil, err
}

func (s store) page(ctx context.Context, scope string, p *KeyPosition, limit int) ([]IdempotencyKey, error) {
	keys := []IdempotencyKey{}
	q := s.db.WithContext(ctx).Select(`idempotency_keys.id, scope, "key", idempotency_keys.operation_id, method, route, fingerprint, target,
  state, owner_token, locked_until, status, `+replaysTotal+` AS replays, created_at, expires_at`).
		Joins(replayCounts).Where("scope = ?", scope)
	if p != nil {
		q = q.Where("created_at < ? OR (created_at = ? AND idempotency_keys.id < ?)", p.CreatedAt, p.CreatedAt, p.ID)
	}
	err := q.Order("created_at DESC, idempotency_keys.id DESC").Limit(limit).Find(&keys).Error
	return keys, err
}

// claim inserts the key, or takes an expired one as a new operation, and
// returns its row's id; 0 when another holds it.
func (s store) claim(ctx context.Context, k IdempotencyKey) (uint, error) {
	var id uint
	err := s.db.WithContext(ctx).Raw(`INSERT INTO idempotency_keys
  (scope, "key", operation_id, method, route, fingerprint, raw_digest, target, state, owner_token, locked_until, status, replays, created_at, expires_at)
VALUES (@scope, @key, @operation, @method, @route, @fingerprint, @digest, @target, @state, @owner, @locked, 0, 0, @now, @expires)
ON CONFLICT (scope, "key") DO UPDATE SET
  operation_id = excluded.operation_id, method = excluded.method, route = excluded.route,
  fingerprint = excluded.fingerprint, raw_digest = excluded.raw_digest, target = excluded.target, state = excluded.state, owner_token = excluded.owner_token,
  locked_until = excluded.locked_until, status = 0, headers = NULL, body = NULL, replays = 0,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE `+claimFence+`
RETURNING id`,
		sql.Named("scope", k.Scope), sql.Named("key", k.Key), sql.Named("operation", k.OperationID), sql.Named("method", k.Method),
		sql.Named("route", k.Route), sql.Named("fingerprint", k.Fingerprint), sql.Named("digest", k.RawDigest), sql.Named("target", k.Target),
		sql.Named("state", KeyInProgress), sql.Named("owner", k.OwnerToken), sql.Named("locked", k.LockedUntil),
		sql.Named("now", k.CreatedAt), sql.Named("expires", k.ExpiresAt)).Row().Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// owned runs stmt (an UPDATE's head or a DELETE) only while k's owner holds the key: the one fence.
func owned(db *gorm.DB, stmt string, k IdempotencyKey, args ...any) (bool, error) {
	args = append(args, k.Scope, k.Key, k.OwnerToken, KeyInProgress)
	res := db.Exec(stmt+` WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`, args...)
	return res.RowsAffected == 1, res.Error
}

// takeover hands a free operation from previousOwner to a retry; its id, and derived key, stay.
// The row and its operation are the ones read (want's): a key swept and claimed anew meanwhile,
// then released, is another operation, which the retry's read must find.
func (s store) takeover(ctx context.Context, want IdempotencyKey, previousOwner string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE idempotency_keys
SET owner_token = ?, locked_until = ?, method = ?, route = ?, fingerprint = ?, raw_digest = ?
WHERE scope = ? AND "key" = ? AND state = ? AND owner_token = ? AND locked_until <= ? AND id = ? AND operation_id = ?`,
		want.OwnerToken, want.LockedUntil, want.Method, want.Route, want.Fingerprint, want.RawDigest,
		want.Scope, want.Key, KeyInProgress, previousOwner, now, want.ID, want.OperationID)
	return res.RowsAffected == 1, res.Error
}

func (s store) extend(ctx context.Context, k IdempotencyKey, until time.Time) (bool, error) {
	return owned(s.db.WithContext(ctx), `UPDATE idempotency_keys SET locked_until = ?`, k, until)
}

func (s store) complete(k IdempotencyKey, resp storedResponse) (bool, error) {
	headers, err := json.Marshal(resp.Headers)
	if err != nil {
		return false, err
	}
	return owned(s.db, `UPDATE idempotency_keys SET state = ?, status = ?, headers = ?, body = ?`, k,
		KeyCompleted, resp.Status, string(headers), resp.Body)
}

// release frees the key at once. The row stays (unless forget), so that a retry keeps the
// derived key: it gets the provider's first answer, not a second charge.
func (s store) release(ctx context.Context, k IdempotencyKey, now time.Time, forget bool) (bool, error) {
	if forget {
		return owned(s.db.WithContext(ctx), `DELETE FROM idempotency_keys`, k)
	}
	return owned(s.db.WithContext(ctx), `UPDATE idempotency_keys SET owner_token = '', locked_until = ?`, k, now)
}

// claimableSQL is claimable at @now: the claim's fence (claimFence) and what the sweep deletes.
const claimableSQL = `idempotency_keys.expires_at <= @now AND (idempotency_keys.state = '` + KeyCompleted +
	`' OR idempotency_keys.locked_until <= @now)`

// sweep deletes up to batch expired keys, sparing one claimed meanwhile, and returns their routes.
func (s store) sweep(ctx context.Context, now time.Time, batch int) ([]string, error) {
	var routes []string
	err := s.db.WithContext(ctx).Raw(`DELETE FROM idempotency_keys
WHERE id IN (SELECT id FROM idempotency_keys WHERE `+claimableSQL+` LIMIT @batch)
  AND `+claimableSQL+`
RETURNING route`,
		sql.Named("now", now), sql.Named("batch", batch)).Scan(&routes).Error
	return routes, err
}

// KeyPosition is the last key of a page; the next page starts after it.
type KeyPosition struct {
	CreatedAt time.Time
	ID        uint
}

// KeysPage lists up to limit of the scope's keys, newest first, after p
// (nil: from the newest), without their answers; more says if any follow.
func (m *Idempotency) KeysPage(ctx context.Context, scope string, p *KeyPosition, limit int) (keys []IdempotencyKey, more bool, err error) {
	keys, err = m.replays.withPending(func() ([]IdempotencyKey, error) {
		return m.store.page(ctx, scope, p, limit+1)
	})
	if len(keys) > limit {
		return keys[:limit], true, err
	}
	return keys, false, err
}

// DefaultSweepBatch is Sweep's batch when it is given no positive one.
const DefaultSweepBatch = 500

// Sweep deletes expired keys in short batches, not to hold claims up, and reports how many.
func (m *Idempotency) Sweep(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		batch = DefaultSweepBatch // a batch of 0 would never come back short
	}
	var total int64
	for {
		routes, err := m.store.sweep(ctx, m.now(), batch)
		total += int64(len(routes))
		for _, route := range routes {
			m.cfg.Observe(route, OutcomeSwept)
		}
		if err != nil || len(routes) < batch {
			return total, err
		}
	}
}

// Keys lists the most recent keys of a scope: KeysPage's first page.
func (m *Idempotency) Keys(ctx context.Context, scope string, limit int) ([]IdempotencyKey, error) {
	keys, _, err := m.KeysPage(ctx, scope, nil, limit)
	return keys, err
}
