package middleware

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
)

// beginProbe is a connection pool that tells probe when a request sent
// with a probe (see call.probe) begins a transaction: an atomic duplicate is
// then about to claim, and to wait for the transaction holding the key.
type beginProbe struct {
	txPool
	probe chan struct{}
}

func (p beginProbe) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	if _, ok := ctx.Value(probeKey{}).(chan struct{}); ok {
		select {
		case p.probe <- struct{}{}:
		default:
		}
	}
	return p.txPool.BeginTx(ctx, opts)
}

// probedThrough is db through a beginProbe.
func probedThrough(db *gorm.DB, probe chan struct{}) *gorm.DB {
	through := db.Session(&gorm.Session{NewDB: true})
	through.Statement.ConnPool = beginProbe{txPool: poolOf(db), probe: probe}
	return through
}

// untilBlocked returns once a request has begun its transaction (probe)
// and, on PostgreSQL, waits for a lock: the atomic duplicate waits on the
// key's unique index there. On SQLite it waits at BEGIN IMMEDIATE for the
// write lock, which nothing outside SQLite can see; the pause gives it the
// moment between beginning and blocking.
func untilBlocked(t *testing.T, db *gorm.DB, probe chan struct{}) {
	t.Helper()
	testkit.Recv(t, probe, "the duplicate to begin its transaction")
	if !database.IsPostgres(db) {
		time.Sleep(50 * time.Millisecond)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int64
		if err := db.Raw(`SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting).Error; err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the duplicate never waited for a lock")
		}
	}
}

// Atomic: a duplicate that arrives at another instance while the
// original's transaction — with its claim and its write — is open waits for
// that transaction in the database, then replays its answer. (A duplicate
// at the same instance waits in memory, holding no connection:
// TestAtomicWaitIsBounded.) The handler runs once.
func TestAtomicDuplicateMidTransactionWaitsAndReplays(t *testing.T) {
	begun := make(chan struct{}, 1)
	g := newGate(t, 1)
	h := newHarness(t, withMode(Atomic), withHooks(hooks{after: g.block}))
	other := New(Config{
		DB: probedThrough(h.db, begun), TTL: time.Hour, Lease: h.lease, Wait: h.wait, Now: h.now,
		Scope:  func(c *gin.Context) string { return c.GetString(userKey) },
		Logger: slog.New(slog.DiscardHandler),
		Observe: func(_ string, o Outcome) {
			h.outcomes.Lock()
			defer h.outcomes.Unlock()
			h.outcomes.seen = append(h.outcomes.seen, o)
		},
	})
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	r := gin.New()
	r.Use(h.authenticate)
	r.POST("/widgets/:id", other.RequireAtomic(), h.handle)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	c := call{key: "k", body: `{"n":1}`}

	first := h.async(c)
	testkit.Recv(t, g.entered, "the original mid-transaction")
	waiter := c
	waiter.probe, waiter.base = true, srv.URL
	second := h.async(waiter)
	untilBlocked(t, h.db, begun)
	g.release(1)

	original := testkit.Recv(t, first, "the original's answer")
	duplicate := testkit.Recv(t, second, "the duplicate's answer")
	h.wantStep("original", original, http.StatusCreated, nil, false, 1)
	h.wantStep("duplicate", duplicate, http.StatusCreated, nil, true, 1)
	if duplicate.body != original.body {
		t.Fatalf("duplicate %q, want the original %q", duplicate.body, original.body)
	}
	if got := h.observed(); !slices.Contains(got, OutcomeWaitedReplayed) {
		t.Fatalf("outcomes %v: the duplicate did not wait for the original", got)
	}
	h.wantKeys("alice/k=completed")
	h.wantWidgets(original.derived() + "#1")
}

// Atomic: the wait is bounded by Config.Wait (at least minClaimWait). A duplicate whose original
// holds its transaction longer gets 409 with Retry-After and writes
// nothing; once the original commits, the retry replays it.
func TestAtomicWaitIsBounded(t *testing.T) {
	g := newGate(t, 1)
	h := newHarness(t, withMode(Atomic), withWait(300*time.Millisecond), withHooks(hooks{after: g.block}))
	c := call{key: "k", body: `{"n":1}`}

	first := h.async(c)
	testkit.Recv(t, g.entered, "the original mid-transaction")
	busy := h.do(c)
	h.wantStep("duplicate past the wait", busy, http.StatusConflict, &refuseInProgress, false, 1)
	if busy.header.Get("Retry-After") == "" {
		t.Fatalf("409 without Retry-After: %v", busy.header)
	}
	g.release(1)
	original := testkit.Recv(t, first, "the original's answer")
	h.wantStep("original", original, http.StatusCreated, nil, false, 1)
	h.wantStep("retry", h.do(c), http.StatusCreated, nil, true, 1)
	h.wantKeys("alice/k=completed")
	h.wantWidgets(original.derived() + "#1")
}

// Atomic: an answer that is not kept rolls the claim back with the writes,
// as if the key had never been used: no row is left, and the corrected
// retry runs as a new operation. A panic does the same.
func TestAtomicRollbackReleasesTheKey(t *testing.T) {
	h := newHarness(t, withMode(Atomic), withHooks(hooks{after: func(c *gin.Context, run int) {
		if run == 2 {
			panic("the handler failed")
		}
	}}))
	h.wantStep("invalid", h.do(call{key: "k", path: "/widgets/1?status=422", body: `{"n":0}`}), http.StatusUnprocessableEntity, nil, false, 1)
	h.wantKeys()
	h.wantWidgets()
	h.wantStep("panic", h.do(call{key: "k", body: `{"n":1}`}), http.StatusInternalServerError, nil, false, 2)
	h.wantKeys()
	h.wantWidgets()
	corrected := h.do(call{key: "k", body: `{"n":2}`})
	h.wantStep("corrected", corrected, http.StatusCreated, nil, false, 3)
	h.wantKeys("alice/k=completed")
	h.wantWidgets(corrected.derived() + "#3")
	h.wantStep("replay", h.do(call{key: "k", body: `{"n":2}`}), http.StatusCreated, nil, true, 3)
}

// crashChildEnv names the database a crash child runs against; see
// TestMain and TestAtomicCrashMidTransactionLeavesNoClaim.
const crashChildEnv = "MIDDLEWARE_CRASH_CHILD_DB"

// atomicWidgets is an atomic route writing one widget, then calling
// midway, over db.
func atomicWidgets(db *gorm.DB, midway func()) http.Handler {
	mw := New(Config{
		DB: db, TTL: time.Hour, Lease: time.Minute, Wait: 2 * time.Second,
		Scope:  func(*gin.Context) string { return "alice" },
		Logger: slog.New(slog.DiscardHandler),
	})
	r := gin.New()
	r.POST("/widgets/:id", mw.RequireAtomic(), func(c *gin.Context) {
		if err := Tx(c).Create(&widget{Ref: DerivedKey(c)}).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		midway()
		c.JSON(http.StatusCreated, gin.H{"ref": DerivedKey(c)})
	})
	return r
}

func widgetRequest() *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/widgets/1", strings.NewReader(`{"n":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k")
	return req
}

// crashChild is the process TestAtomicCrashMidTransactionLeavesNoClaim
// kills: it claims the key and writes a widget in one open transaction,
// says so, and waits to be killed.
func crashChild(databaseURL string) {
	db, err := database.Open(databaseURL, database.Options{GroupCommit: testkit.GroupCommit})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	h := atomicWidgets(db, func() {
		fmt.Println("in-transaction")
		select {}
	})
	h.ServeHTTP(httptest.NewRecorder(), widgetRequest())
	os.Exit(3) // not reached: the handler never returns
}

// Atomic: a process killed (SIGKILL) in the middle of the operation's
// transaction leaves no claim behind, since the claim was never committed.
// The retry, on another process, runs at once — no lease to wait out — and
// the operation happens once.
func TestAtomicCrashMidTransactionLeavesNoClaim(t *testing.T) {
	url := testkit.URL(t)
	db := testkit.Open(t, url)
	if err := db.AutoMigrate(append(Tables(), &widget{})...); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildEnv+"="+url)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	if line := testkit.Recv(t, said, "the child mid-transaction"); line != "in-transaction" {
		t.Fatalf("the child said %q", line)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	var keys, widgets int64
	db.Model(&IdempotencyKey{}).Count(&keys)
	db.Model(&widget{}).Count(&widgets)
	if keys != 0 || widgets != 0 {
		t.Fatalf("after the kill: %d keys and %d widgets, want none", keys, widgets)
	}
	w := httptest.NewRecorder()
	atomicWidgets(db, func() {}).ServeHTTP(w, widgetRequest())
	if w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "" {
		t.Fatalf("retry: %d %v %s, want a fresh 201", w.Code, w.Header(), w.Body)
	}
	states, err := keyStates(db)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := widgetRefs(db)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(states, []string{"alice/k=completed"}) || len(refs) != 1 {
		t.Fatalf("after the retry: keys %q, widgets %q; want one completed key and one widget", states, refs)
	}
}
