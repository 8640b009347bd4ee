package middleware

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

const defaultFlushEvery = time.Second

// replayOf names one operation of a key: the count belongs to the
// operation, so that replays of an expired key's old operation are not
// added to a new one that reclaimed the row.
type replayOf struct {
	scope, key  string
	operationID string
}

func replayOfKey(k IdempotencyKey) replayOf { return replayOf{k.Scope, k.Key, k.OperationID} }

// replayCounter keeps the replay count off the request path: the counts
// reach the database in batches, on an interval and on Close. A crash
// loses at most one interval of counts, never an answer.
type replayCounter struct {
	db *gorm.DB

	mu      sync.Mutex
	pending map[replayOf]int

	// flushing is held while counts move from pending to the rows, so that
	// a reader adding pending counts to what it read never counts one twice
	// or misses one.
	flushing sync.Mutex

	// stopping ends the background flush in progress when close begins:
	// its counts go back to pending, for close to write under its context.
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
			// A failed flush keeps its counts for the next one.
			_ = r.flush(r.stopping)
		}
	}
}

// flush writes the pending counts, all in one transaction; on failure they
// stay pending.
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
	// In key order, as every instance flushes: two flushes over the same
	// rows then lock them in the same order and cannot deadlock.
	keys := slices.SortedFunc(maps.Keys(batch), func(a, b replayOf) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.key, b.key))
	})
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if _, ok := tx.Dialector.(*postgres.Dialector); ok {
			return addReplaysAtOnce(tx, keys, batch)
		}
		for _, k := range keys {
			if err := tx.Exec(`UPDATE idempotency_keys SET replays = replays + ? WHERE scope = ? AND "key" = ? AND operation_id = ?`, batch[k], k.scope, k.key, k.operationID).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.mu.Lock()
		for k, n := range batch {
			r.pending[k] += n
		}
		r.mu.Unlock()
	}
	return err
}

// addReplaysAtOnce writes the counts in two statements on PostgreSQL, not
// one per key (a thousand keys were a thousand round trips). The rows are
// locked first, in key order byte by byte (COLLATE "C"), as the per-key
// path sorts them in Go, so that two instances' flushes over the same rows
// lock them in one order and cannot deadlock; then one update adds every
// count.
func addReplaysAtOnce(tx *gorm.DB, keys []replayOf, batch map[replayOf]int) error {
	type count struct {
		Scope string `json:"scope"`
		Key   string `json:"key"`
		Op    string `json:"op"`
		N     int    `json:"n"`
	}
	counts := make([]count, len(keys))
	for i, k := range keys {
		counts[i] = count{k.scope, k.key, k.operationID, batch[k]}
	}
	doc, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	const counted = `jsonb_to_recordset(?::jsonb) AS c(scope text, "key" text, op text, n bigint)`
	if err := tx.Exec(`SELECT 1 FROM idempotency_keys k, `+counted+` WHERE k.scope = c.scope AND k."key" = c."key" AND k.operation_id = c.op ORDER BY k.scope COLLATE "C", k."key" COLLATE "C" FOR UPDATE OF k`, string(doc)).Error; err != nil {
		return err
	}
	return tx.Exec(`UPDATE idempotency_keys k SET replays = replays + c.n FROM `+counted+` WHERE k.scope = c.scope AND k."key" = c."key" AND k.operation_id = c.op`, string(doc)).Error
}

// withPending adds the counts not yet written to keys just read; read runs
// while no flush is under way.
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

// close stops the background flushes and writes what is left.
func (r *replayCounter) close(ctx context.Context) error {
	r.stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.flush(ctx)
}
