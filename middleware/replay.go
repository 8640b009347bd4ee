package middleware

// Replay: a completed key's answer sent again verbatim, from this instance's
// cache or else the key's row; and the replay counts, kept off the request path.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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

// replayOf names one operation of a key, so that a reclaimed row does not inherit old replays.
type replayOf struct {
	scope, key  string
	operationID string
}

func replayOfKey(k IdempotencyKey) replayOf { return replayOf{k.Scope, k.Key, k.OperationID} }

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

// The counts of a flush, as rows of a JSON document, on each database.
const (
	countsPostgres = `jsonb_to_recordset(?::jsonb) AS c(scope text, "key" text, op text, n bigint)`
	countsSQLite   = `(SELECT value->>'scope' AS scope, value->>'key' AS "key", value->>'op' AS op, value->>'n' AS n
  FROM json_each(?)) AS c`
	countedRow = `k.scope = c.scope AND k."key" = c."key" AND k.operation_id = c.op`
)

// flush writes the pending counts in one update, or keeps them. On PostgreSQL the rows are
// locked first, in one byte order, so that two instances' flushes cannot deadlock.
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
	counts := make([]map[string]any, 0, len(batch))
	for k, n := range batch {
		counts = append(counts, map[string]any{"scope": k.scope, "key": k.key, "op": k.operationID, "n": n})
	}
	doc, err := json.Marshal(counts)
	if err == nil {
		err = r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			counted := countsSQLite
			if _, ok := tx.Dialector.(*postgres.Dialector); ok {
				counted = countsPostgres
				lock := `SELECT 1 FROM idempotency_keys k, ` + counted + ` WHERE ` + countedRow +
					` ORDER BY k.scope COLLATE "C", k."key" COLLATE "C" FOR UPDATE OF k`
				if err := tx.Exec(lock, string(doc)).Error; err != nil {
					return err
				}
			}
			update := `UPDATE idempotency_keys AS k SET replays = replays + c.n FROM ` + counted + ` WHERE ` + countedRow
			return tx.Exec(update, string(doc)).Error
		})
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
