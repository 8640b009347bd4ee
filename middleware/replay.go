package middleware

// Replay: a completed key's answer sent again verbatim, from this instance's
// cache or else the key's row; and the replay counts, kept off the request path.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Where a replayed answer was found: this instance's cache, or the key's row.
var (
	fromMemory   = attribute.String("idempotency.replayed_from", "memory")
	fromDatabase = attribute.String("idempotency.replayed_from", "database")
)

// replayStored answers from the completed key found, and caches its answer.
func (m *Idempotency) replayStored(c *gin.Context, found IdempotencyKey, raw [sha256.Size]byte, waited bool) {
	var headers http.Header
	if err := json.Unmarshal([]byte(found.Headers), &headers); err != nil {
		m.internal(c, "decode stored response", err)
		return
	}
	a := answerOf(found, raw, found.Status, headers, found.Body)
	m.answers.put(a)
	m.replay(c, a, fromDatabase, waited)
}

// replay counts the answer, so that Keys reports all a client has seen, then sends it verbatim.
func (m *Idempotency) replay(c *gin.Context, a *cached, from attribute.KeyValue, waited bool) {
	m.replays.add(a.replayOf)
	outcome := OutcomeReplayed
	if waited {
		outcome = OutcomeWaitedReplayed
	}
	if span := m.observe(c.Request.Context(), c.FullPath(), outcome); span.IsRecording() {
		span.SetAttributes(from)
	}
	send(c.Writer, a.headers, ReplayedHeader, a.status, a.body)
	c.Abort()
}

// Replayed reports whether the answer sent was a stored one, replayed.
func Replayed(c *gin.Context) bool { return c.Writer.Header().Get(ReplayedHeader) == "true" }

// Replay counts reach the rows in batches: a crash loses one interval of counts, never an answer.
const defaultFlushEvery = time.Second

// replayOf names one operation of a key by the key's row, so that a reclaimed row does not
// inherit old replays, and a flush finds each row by its primary key.
type replayOf struct {
	keyID       uint
	operationID string
}

func replayOfKey(k IdempotencyKey) replayOf { return replayOf{k.ID, k.OperationID} }

type replayCounter struct {
	db      *gorm.DB
	mu      sync.Mutex
	pending map[replayOf]int
	// flushing is held while counts move to the rows, so that a reader counts each once.
	flushing sync.Mutex
	// stopping ends a background flush when close begins, to write under close's context.
	stopping context.Context
	stop     context.CancelFunc
	done     chan struct{}
}

func newReplayCounter(db *gorm.DB, every time.Duration) *replayCounter {
	r := &replayCounter{db: db, pending: map[replayOf]int{}, done: make(chan struct{})}
	r.stopping, r.stop = context.WithCancel(context.Background())
	go r.loop(every)
	return r
}

func (r *replayCounter) add(k replayOf) {
	r.mu.Lock()
	r.pending[k]++
	r.mu.Unlock()
}

func (r *replayCounter) loop(every time.Duration) {
	defer close(r.done)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-r.stopping.Done():
			return
		case <-ticker.C:
			_ = r.flush(r.stopping) // a failed flush keeps its counts for the next
		}
	}
}

// ReplayCount is how often a key's operation was replayed, in a row of its own, so that
// counting a replay never rewrites the key's stored answer (a narrow row, not a wide one).
// A row left by an earlier operation of the key counts for nothing; deleting the key
// deletes its count. IdempotencyKey.Replays holds what a release before this table counted.
type ReplayCount struct {
	KeyID       uint           `gorm:"primaryKey;autoIncrement:false"`
	Key         IdempotencyKey `gorm:"foreignKey:KeyID;constraint:OnDelete:CASCADE"`
	OperationID string         `gorm:"size:36;not null"`
	N           int            `gorm:"column:n;not null"`
}

// TableName is the table migration 16 creates.
func (ReplayCount) TableName() string { return "idempotency_replays" }

// Tables are the middleware's models, for an application's AutoMigrate.
func Tables() []any { return []any{&IdempotencyKey{}, &ReplayCount{}} }

// A read of keys joins replayCounts, and replaysTotal is then each key's replays.
const (
	replayCounts = `LEFT JOIN idempotency_replays r ON r.key_id = idempotency_keys.id AND r.operation_id = idempotency_keys.operation_id`
	replaysTotal = `idempotency_keys.replays + COALESCE(r.n, 0)`
)

// The counts of a flush, as rows of a JSON document of [key id, operation, n] arrays, on each
// database (an array a count: a third of the bytes of objects naming the key, and on SQLite
// about half the time: docs/idempotency.md).
const (
	countsPostgres = `(SELECT (e->>0)::bigint AS id, e->>1 AS op, (e->>2)::bigint AS n FROM jsonb_array_elements(?::jsonb) AS e) AS c`
	countsSQLite   = `(SELECT value->>0 AS id, value->>1 AS op, value->>2 AS n FROM json_each(?)) AS c`
	// addCounts adds each count to its key's row of idempotency_replays, in the keys' order, so
	// that two instances' flushes lock rows in one order and cannot deadlock; a row of an
	// earlier operation of the key starts again.
	addCounts = `INSERT INTO idempotency_replays AS r (key_id, operation_id, n)
SELECT k.id, k.operation_id, c.n FROM idempotency_keys k, %s
WHERE k.id = c.id AND k.operation_id = c.op ORDER BY k.id
ON CONFLICT (key_id) DO UPDATE SET
  n = CASE WHEN r.operation_id = excluded.operation_id THEN r.n + excluded.n ELSE excluded.n END,
  operation_id = excluded.operation_id`
)

// flush writes the pending counts in one statement, or keeps them.
func (r *replayCounter) flush(ctx context.Context) error {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	r.mu.Lock()
	batch := r.pending
	r.pending = map[replayOf]int{}
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	counts := make([][3]any, 0, len(batch))
	for k, n := range batch {
		counts = append(counts, [3]any{k.keyID, k.operationID, n})
	}
	doc, err := json.Marshal(counts)
	if err == nil {
		counted := countsSQLite
		if _, ok := r.db.Dialector.(*postgres.Dialector); ok {
			counted = countsPostgres
		}
		err = r.write(ctx, fmt.Sprintf(addCounts, counted), string(doc))
	}
	if err != nil {
		r.mu.Lock()
		for k, n := range batch {
			r.pending[k] += n
		}
		r.mu.Unlock()
	}
	return err
}

// write runs the flush's statement in a transaction whose commit ctx does not cut off:
// a statement cut off is rolled back, so its counts, kept for the next flush, count once.
// (Cut off on its own, it might have committed all the same.) ctx cuts off the wait to
// begin too, so a Close past its deadline does not wait for a database that never answers.
func (r *replayCounter) write(ctx context.Context, sql string, doc string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	begun, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	tx := r.db.WithContext(begun).Begin()
	if !stop() { // ctx ended while beginning: begun is cancelled, the transaction unusable
		if tx.Error == nil {
			tx.Rollback()
		}
		return ctx.Err()
	}
	if tx.Error != nil {
		return tx.Error
	}
	if err := tx.WithContext(ctx).Exec(sql, doc).Error; err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit().Error
}

// withPending adds the counts not yet written to the keys read.
func (r *replayCounter) withPending(read func() ([]IdempotencyKey, error)) ([]IdempotencyKey, error) {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	keys, err := read()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, k := range keys {
		keys[i].Replays += r.pending[replayOfKey(k)]
	}
	return keys, nil
}

func (r *replayCounter) close(ctx context.Context) error {
	r.stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.flush(ctx)
}
