package middleware

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
)

// countingPool counts what reaches the database outside a transaction —
// each statement, and each transaction begun. Statements inside a
// transaction go to the *sql.Tx and are not counted here.
type countingPool struct {
	txPool
	mu         sync.Mutex
	statements []string
	begins     int
	inTx       []string // statements inside transactions, by countTxStatements
}

func (p *countingPool) note(query string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statements = append(p.statements, strings.Fields(query)[0])
}

func (p *countingPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	p.note(query)
	return p.txPool.ExecContext(ctx, query, args...)
}

func (p *countingPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	p.note(query)
	return p.txPool.QueryContext(ctx, query, args...)
}

func (p *countingPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	p.note(query)
	return p.txPool.QueryRowContext(ctx, query, args...)
}

func (p *countingPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	p.mu.Lock()
	p.begins++
	p.mu.Unlock()
	return p.txPool.BeginTx(ctx, opts)
}

// txPool is a database's own pool as GORM holds it — *sql.DB, or on
// SQLite its writer and readers, whose transactions are savepoints in a
// shared one (group commit) — which test pools wrap.
type txPool interface {
	gorm.ConnPool
	BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error)
}

// poolOf is db's own pool, beginning transactions of either kind.
func poolOf(db *gorm.DB) txPool {
	switch p := db.ConnPool.(type) {
	case gorm.TxBeginner:
		return sqlDBPool{db.ConnPool, p}
	case txPool:
		return p
	}
	panic(fmt.Sprintf("no transactions on %T", db.ConnPool))
}

// sqlDBPool is a pool whose BeginTx returns *sql.Tx, as a txPool.
type sqlDBPool struct {
	gorm.ConnPool
	beginner gorm.TxBeginner
}

func (p sqlDBPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	tx, err := p.beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

// take returns what was counted since the last take.
func (p *countingPool) take() (statements []string, begins int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	statements, begins = p.statements, p.begins
	p.statements, p.begins = nil, 0
	return statements, begins
}

// countTxStatements records the first word of each statement gorm runs in a
// transaction on db, into pool: the pool itself sees only what runs outside.
func countTxStatements(t *testing.T, db *gorm.DB, pool *countingPool) {
	t.Helper()
	note := func(tx *gorm.DB) {
		if _, inTx := tx.Statement.ConnPool.(gorm.TxCommitter); inTx && tx.Statement.SQL.Len() > 0 {
			pool.mu.Lock()
			pool.inTx = append(pool.inTx, strings.Fields(tx.Statement.SQL.String())[0])
			pool.mu.Unlock()
		}
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("gorm:create").Register("cost:create", note),
		cb.Query().After("gorm:query").Register("cost:query", note),
		cb.Update().After("gorm:update").Register("cost:update", note),
		cb.Delete().After("gorm:delete").Register("cost:delete", note),
		cb.Row().After("gorm:row").Register("cost:row", note),
		cb.Raw().After("gorm:raw").Register("cost:raw", note),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// counted is a database whose statements are counted, and instances of the
// middleware over it.
type counted struct {
	db   *gorm.DB
	pool *countingPool
	over *gorm.DB // db, through pool
}

func newCounted(t *testing.T) *counted {
	t.Helper()
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(append(Tables(), &widget{})...); err != nil {
		t.Fatal(err)
	}
	pool := &countingPool{txPool: poolOf(db)}
	over := db.Session(&gorm.Session{NewDB: true})
	over.Statement.ConnPool = pool
	countTxStatements(t, db, pool)
	return &counted{db: db, pool: pool, over: over}
}

// instance is one instance of the middleware over the counted pool, in
// front of a handler that writes one widget through Tx; cacheBytes as
// Config.CacheBytes.
func (d *counted) instance(t *testing.T, mode Mode, cacheBytes int64) (*Idempotency, http.Handler) {
	t.Helper()
	mw := New(Config{
		DB: d.over, TTL: time.Hour, Lease: time.Minute, Wait: time.Second, FlushEvery: time.Hour, CacheBytes: cacheBytes,
		Scope:  func(c *gin.Context) string { return c.GetHeader("X-Test-User") },
		Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() { _ = mw.Close(context.Background()) })
	require := mw.Require()
	if mode == Atomic {
		require = mw.RequireAtomic()
	}
	r := gin.New()
	r.POST("/widgets/:id", require, func(c *gin.Context) {
		if err := Tx(c).Create(&widget{Ref: DerivedKey(c)}).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.JSON(http.StatusCreated, gin.H{"ok": true})
	})
	return mw, r
}

// countedMiddleware is one two-phase instance with the default cache.
func countedMiddleware(t *testing.T) (*gorm.DB, *countingPool, *Idempotency, http.Handler) {
	t.Helper()
	d := newCounted(t)
	mw, h := d.instance(t, TwoPhase, 0)
	return d.db, d.pool, mw, h
}

func serve(t *testing.T, h http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/widgets/1", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-User", "alice")
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// wantCost checks what reached the database since the last look: the
// statements outside a transaction, the transactions begun, and the
// statements inside them.
func (p *countingPool) wantCost(t *testing.T, what, outside string, begins int, inside string) {
	t.Helper()
	p.mu.Lock()
	gotOutside, gotBegins, gotInside := fmt.Sprint(p.statements), p.begins, fmt.Sprint(p.inTx)
	p.statements, p.begins, p.inTx = nil, 0, nil
	p.mu.Unlock()
	if gotOutside != outside || gotBegins != begins || gotInside != inside {
		t.Fatalf("%s: outside a transaction %s, %d transactions, inside %s; want %s, %d, %s",
			what, gotOutside, gotBegins, gotInside, outside, begins, inside)
	}
}

// Two-phase: the fresh path finds the key, claims it in one statement of its
// own, and completes it inside the business transaction. Atomic: one read,
// then one transaction with the claim, the business write and the
// completion, and nothing else.
func TestFreshPathCost(t *testing.T) {
	d := newCounted(t)
	_, twoPhase := d.instance(t, TwoPhase, 0)
	_, atomic := d.instance(t, Atomic, 0)
	d.pool.take()
	d.pool.wantCost(t, "nothing yet", "[]", 0, "[]")

	if w := serve(t, twoPhase, "two", `{"n":1}`); w.Code != http.StatusCreated {
		t.Fatalf("two-phase: %d %s", w.Code, w.Body)
	}
	d.pool.wantCost(t, "two-phase fresh", "[SELECT INSERT]", 1, "[INSERT UPDATE]")

	if w := serve(t, atomic, "one", `{"n":1}`); w.Code != http.StatusCreated {
		t.Fatalf("atomic: %d %s", w.Code, w.Body)
	}
	d.pool.wantCost(t, "atomic fresh", "[SELECT]", 1, "[INSERT INSERT UPDATE]")

	var widgets, completed int64
	d.db.Model(&widget{}).Count(&widgets)
	d.db.Model(&IdempotencyKey{}).Where("state = ?", KeyCompleted).Count(&completed)
	if widgets != 2 || completed != 2 {
		t.Fatalf("%d widgets and %d completed keys, want 2 and 2", widgets, completed)
	}
}

// A replay this instance has seen — its own answer, or one it replayed
// before — issues no statement at all, and neither does a mismatch of it.
// Replay counts are kept in memory, shown by Keys at once, and written by
// the flush.
func TestCachedReplayIssuesNoStatement(t *testing.T) {
	for _, mode := range []Mode{TwoPhase, Atomic} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			d := newCounted(t)
			mw, h := d.instance(t, mode, 0)
			body := `{"n":1}`
			if w := serve(t, h, "k", body); w.Code != http.StatusCreated {
				t.Fatalf("fresh: %d %s", w.Code, w.Body)
			}
			d.pool.take()
			d.pool.inTx = nil
			for i := range 3 {
				w := serve(t, h, "k", body)
				if w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" || w.Body.String() != `{"ok":true}` {
					t.Fatalf("replay %d: %d %v %s", i, w.Code, w.Header(), w.Body)
				}
				d.pool.wantCost(t, fmt.Sprintf("cached replay %d", i), "[]", 0, "[]")
			}
			// The same JSON written another way is the same request: its
			// fingerprint, not its bytes, decides, still from memory.
			if w := serve(t, h, "k", "{ \"n\" : 1.0 }"); w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" {
				t.Fatalf("reformatted: %d %v %s", w.Code, w.Header(), w.Body)
			}
			d.pool.wantCost(t, "cached replay of the same JSON written another way", "[]", 0, "[]")
			if w := serve(t, h, "k", `{"n":2}`); w.Code != http.StatusUnprocessableEntity {
				t.Fatalf("mismatch: %d %s", w.Code, w.Body)
			}
			d.pool.wantCost(t, "cached mismatch", "[]", 0, "[]")

			var widgets int64
			if err := d.db.Model(&widget{}).Count(&widgets).Error; err != nil || widgets != 1 {
				t.Fatalf("%d widgets (%v), want 1", widgets, err)
			}
			replaysOf := func() (row, listed int) {
				t.Helper()
				keys, err := mw.Keys(context.Background(), "alice", 10)
				if err != nil || len(keys) != 1 {
					t.Fatalf("keys %v: %v", keys, err)
				}
				return storedReplays(t, d.db, "alice", "k"), keys[0].Replays
			}
			if row, listed := replaysOf(); row != 0 || listed != 4 {
				t.Fatalf("before the flush: row counts %d replays, Keys %d; want 0 and 4", row, listed)
			}
			if err := mw.replays.flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if row, listed := replaysOf(); row != 4 || listed != 4 {
				t.Fatalf("after the flush: row counts %d replays, Keys %d; want 4 and 4", row, listed)
			}
		})
	}
}

// An instance that has not seen a key replays it with one read and writes
// no row; from then on it has it in memory. With the cache off, every
// replay is that one read.
func TestColdReplayIsOneReadAndWritesNoRow(t *testing.T) {
	d := newCounted(t)
	_, first := d.instance(t, Atomic, 0)
	_, cold := d.instance(t, Atomic, 0)
	_, uncached := d.instance(t, Atomic, -1)
	if w := serve(t, first, "k", `{"n":1}`); w.Code != http.StatusCreated {
		t.Fatalf("fresh: %d %s", w.Code, w.Body)
	}
	d.pool.take()
	d.pool.inTx = nil
	for i, step := range []struct {
		h       http.Handler
		what    string
		outside string
	}{
		{cold, "cold instance, first replay", "[SELECT]"},
		{cold, "cold instance, second replay", "[]"},
		{uncached, "no cache, first replay", "[SELECT]"},
		{uncached, "no cache, second replay", "[SELECT]"},
	} {
		w := serve(t, step.h, "k", `{"n":1}`)
		if w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" {
			t.Fatalf("%d %s: %d %v", i, step.what, w.Code, w.Header())
		}
		d.pool.wantCost(t, step.what, step.outside, 0, "[]")
	}
}

// Counts of a key's old operation are not added to the new operation that
// reclaimed the row after it expired: neither those written, nor those still
// pending; the new operation's first count starts its row again.
func TestReplayCountStaysWithItsOperation(t *testing.T) {
	db, _, mw, h := countedMiddleware(t)
	replays := func(want int, when string) {
		t.Helper()
		if err := mw.replays.flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := storedReplays(t, db, "alice", "k"); n != want {
			t.Fatalf("%s: replays %d, want %d", when, n, want)
		}
	}
	serve(t, h, "k", `{"n":1}`)
	for range 2 {
		if w := serve(t, h, "k", `{"n":1}`); w.Header().Get(ReplayedHeader) != "true" {
			t.Fatalf("a repeat: %d %v, want a replay", w.Code, w.Header())
		}
	}
	replays(2, "the first operation")
	if w := serve(t, h, "k", `{"n":1}`); w.Header().Get(ReplayedHeader) != "true" { // pending
		t.Fatalf("a repeat: %d %v, want a replay", w.Code, w.Header())
	}
	if err := db.Model(&IdempotencyKey{}).Where(`"key" = ?`, "k").Update("operation_id", "another").Error; err != nil {
		t.Fatal(err)
	}
	replays(0, "the key reclaimed")
	var k IdempotencyKey
	if err := db.Where(`"key" = ?`, "k").Take(&k).Error; err != nil {
		t.Fatal(err)
	}
	mw.replays.add(replayOf{k.ID, "another"})
	replays(1, "a replay of the new operation")
}

// String names a mode in the names of subtests.
func (m Mode) String() string {
	if m == Atomic {
		return "atomic"
	}
	return "two-phase"
}
