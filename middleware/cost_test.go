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
	"github.com/shop/shop/models"
)

// countingPool counts what reaches the database outside a transaction —
// each statement, and each transaction begun. Statements inside a
// transaction go to the *sql.Tx and are not counted here.
type countingPool struct {
	*sql.DB
	mu         sync.Mutex
	statements []string
	begins     int
}

func (p *countingPool) note(query string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statements = append(p.statements, strings.Fields(query)[0])
}

func (p *countingPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	p.note(query)
	return p.DB.ExecContext(ctx, query, args...)
}

func (p *countingPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	p.note(query)
	return p.DB.QueryContext(ctx, query, args...)
}

func (p *countingPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	p.note(query)
	return p.DB.QueryRowContext(ctx, query, args...)
}

func (p *countingPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	p.mu.Lock()
	p.begins++
	p.mu.Unlock()
	return p.DB.BeginTx(ctx, opts)
}

// take returns what was counted since the last take.
func (p *countingPool) take() (statements []string, begins int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	statements, begins = p.statements, p.begins
	p.statements, p.begins = nil, 0
	return statements, begins
}

// countedMiddleware is the middleware over a counted connection pool, in
// front of a handler that writes one widget through Tx.
func countedMiddleware(t *testing.T) (*gorm.DB, *countingPool, *Idempotency, http.Handler) {
	t.Helper()
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(&models.IdempotencyKey{}, &widget{}); err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	pool := &countingPool{DB: sqlDB}
	counted := db.Session(&gorm.Session{NewDB: true})
	counted.Statement.ConnPool = pool
	mw := New(Config{
		DB: counted, TTL: time.Hour, Lease: time.Minute, Wait: time.Second, FlushEvery: time.Hour,
		Scope:  func(c *gin.Context) string { return c.GetHeader("X-Test-User") },
		Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() { _ = mw.Close(context.Background()) })
	r := gin.New()
	r.POST("/widgets/:id", mw.Require(), func(c *gin.Context) {
		if err := Tx(c).Create(&widget{Ref: DerivedKey(c)}).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.JSON(http.StatusCreated, gin.H{"ok": true})
	})
	return db, pool, mw, r
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

// The fresh path claims in one statement and completes inside the business
// transaction; a replay is one read: no write, no transaction. Replay counts
// are kept in memory, shown by Keys at once, and written by the flush.
func TestReplayIsOneReadAndFreshClaimIsOneStatement(t *testing.T) {
	db, pool, mw, h := countedMiddleware(t)
	body := `{"n":1}`

	pool.take()
	if w := serve(t, h, "k", body); w.Code != http.StatusCreated {
		t.Fatalf("fresh: %d %s", w.Code, w.Body)
	}
	statements, begins := pool.take()
	if got := fmt.Sprint(statements); got != "[SELECT INSERT]" || begins != 1 {
		t.Fatalf("fresh path outside its transaction: %s and %d transactions; want [SELECT INSERT] (find, claim) and 1", got, begins)
	}

	for i := range 3 {
		w := serve(t, h, "k", body)
		if w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" {
			t.Fatalf("replay %d: %d %v", i, w.Code, w.Header())
		}
		statements, begins := pool.take()
		if got := fmt.Sprint(statements); got != "[SELECT]" || begins != 0 {
			t.Fatalf("replay %d: %s and %d transactions; want one SELECT and none", i, got, begins)
		}
	}
	var widgets int64
	if err := db.Model(&widget{}).Count(&widgets).Error; err != nil || widgets != 1 {
		t.Fatalf("%d widgets (%v), want 1", widgets, err)
	}

	replaysOf := func() (row, listed int) {
		t.Helper()
		var k models.IdempotencyKey
		if err := db.Where(`"key" = ?`, "k").Take(&k).Error; err != nil {
			t.Fatal(err)
		}
		keys, err := mw.Keys(context.Background(), "alice", 10)
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys %v: %v", keys, err)
		}
		return k.Replays, keys[0].Replays
	}
	if row, listed := replaysOf(); row != 0 || listed != 3 {
		t.Fatalf("before the flush: row counts %d replays, Keys %d; want 0 and 3", row, listed)
	}
	if err := mw.replays.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if row, listed := replaysOf(); row != 3 || listed != 3 {
		t.Fatalf("after the flush: row counts %d replays, Keys %d; want 3 and 3", row, listed)
	}
}

// Counts of a key's old operation are not added to the new operation that
// reclaimed the row after it expired.
func TestReplayCountStaysWithItsOperation(t *testing.T) {
	db, _, mw, h := countedMiddleware(t)
	serve(t, h, "k", `{"n":1}`)
	serve(t, h, "k", `{"n":1}`)
	if err := db.Model(&models.IdempotencyKey{}).Where(`"key" = ?`, "k").Update("operation_id", "another").Error; err != nil {
		t.Fatal(err)
	}
	if err := mw.replays.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var k models.IdempotencyKey
	if err := db.Where(`"key" = ?`, "k").Take(&k).Error; err != nil || k.Replays != 0 {
		t.Fatalf("replays %d (%v), want 0", k.Replays, err)
	}
}
