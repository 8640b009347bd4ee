package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
)

// A renderer that only writes, and leaves the chain running, must not let
// the business handler run without a claim: every refusal aborts in the
// middleware itself.
func TestRefusalsAbortWhateverTheRenderer(t *testing.T) {
	writeOnly := func(c *gin.Context, r Refusal) {
		if r.RetryAfter > 0 {
			c.Header("Retry-After", strconv.Itoa(r.RetryAfter))
		}
		body, _ := json.Marshal(map[string]string{"type": r.Type})
		c.Data(r.Status, "application/problem+json", body)
	}
	h := newHarness(t, withRefuse(writeOnly), withWait(0))
	g := newGate(t, 1)
	h.hooks.before = g.block
	running := h.async(call{key: "busy", body: `{}`})
	testkit.Recv(t, g.entered, "the original in the handler")
	steps := []struct {
		name string
		call call
		typ  Refusal
	}{
		{"no user", call{user: "-", key: "k", body: `{}`}, refuseUnauthenticated},
		{"no key", call{body: `{}`}, refuseKeyMissing},
		{"invalid key", call{key: `"k";p=1`, body: `{}`}, refuseKeyInvalid},
		{"body too large", call{key: "k", body: strings.Repeat(" ", MaxBodyBytes+1)}, refuseTooLarge},
		{"malformed JSON", call{key: "k", body: `{`}, refuseMalformed},
		{"another body", call{key: "busy", body: `{"a":1}`}, refuseKeyReused},
		{"still in progress", call{key: "busy", body: `{}`}, refuseInProgress},
	}
	for _, s := range steps {
		wantProblem(t, h.do(s.call), s.typ)
		if n := h.entered.Load(); n != 1 {
			t.Fatalf("%s: the business handler was entered %d times, want once (the original)", s.name, n)
		}
	}
	g.release(1)
	wantAnswer(t, testkit.Recv(t, running, "the original's answer"), http.StatusCreated, false)
	h.wantRuns("/widgets/1", 1)
}

// Timeout bounds the whole attempt, the recording of its outcome included:
// a handler that finishes after it is rolled back, answers 500 and releases
// its key, so the retry runs and its answer is the one stored.
func TestAnAttemptFinishingAfterItsTimeoutIsRolledBackAndReleased(t *testing.T) {
	h := newHarness(t, withTimeout(50*time.Millisecond), withHooks(hooks{after: func(c *gin.Context, run int) {
		if run == 1 {
			<-c.Request.Context().Done() // written, then the attempt's deadline passes
		}
	}}))
	c := call{key: "late", body: `{}`}
	late := h.do(c)
	wantProblem(t, late, refuseInternal)
	h.wantKeys("alice/late=released")
	h.wantWidgets()
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	h.wantWidgets(derived[1] + "#2")
	h.wantKeys("alice/late=completed")
	wantAnswer(t, h.do(c), http.StatusCreated, true)
}

// Close must not wait past its context for a flush the background loop
// started: that flush ends when Close begins, and Close writes its counts.
func TestCloseDoesNotWaitForAStuckFlush(t *testing.T) {
	h := newHarness(t)
	wantAnswer(t, h.do(call{key: "k", body: `{}`}), http.StatusCreated, false)
	entered, stuck := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	var flushed atomic.Bool
	err := h.db.Callback().Raw().Before("gorm:raw").Register("test:stuck-flush", func(tx *gorm.DB) {
		if !strings.Contains(tx.Statement.SQL.String(), "INSERT INTO idempotency_replays") || flushed.Swap(true) {
			return
		}
		close(entered)
		select { // a statement that only its context can end
		case <-tx.Statement.Context.Done():
			_ = tx.AddError(tx.Statement.Context.Err())
		case <-stuck:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mw := New(Config{DB: h.db, TTL: time.Hour, Lease: time.Minute, Now: h.now, FlushEvery: time.Millisecond,
		Scope: func(c *gin.Context) string { return "alice" }})
	k, _ := h.key("alice", "k")
	mw.replays.add(replayOfKey(k))
	testkit.Recv(t, entered, "the background flush to start")
	closed := make(chan error, 1)
	go func() { closed <- mw.Close(context.Background()) }()
	if err := testkit.Recv(t, closed, "Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := storedReplays(t, h.db, "alice", "k"); n != 1 {
		t.Fatalf("replays = %d after Close, want the one counted", n)
	}
}

// Sweep with a batch of zero (or less) sweeps in the default batch size
// instead of looping for ever.
func TestSweepWithoutABatchSize(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	for _, key := range []string{"a", "b", "c"} {
		k := IdempotencyKey{
			Scope: "alice", Key: key, OperationID: "op-" + key, Method: "POST", Route: "/widgets/:id",
			Fingerprint: "f", State: KeyCompleted, OwnerToken: "o", LockedUntil: now.Add(-time.Hour),
			CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Second),
		}
		if err := h.db.Create(&k).Error; err != nil {
			t.Fatal(err)
		}
	}
	for _, batch := range []int{0, -1} {
		swept := make(chan int64, 1)
		go func() {
			n, err := h.mw.Sweep(context.Background(), batch)
			if err != nil {
				t.Errorf("Sweep(%d): %v", batch, err)
			}
			swept <- n
		}()
		want := int64(3)
		if batch < 0 {
			want = 0
		}
		if n := testkit.Recv(t, swept, "Sweep to return"); n != want {
			t.Fatalf("Sweep(%d) = %d, want %d", batch, n, want)
		}
	}
	h.wantKeys()
}

// failReleases makes the next n release statements fail, as a cut database
// link would; n < 0 fails them all.
func failReleases(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	err := db.Callback().Raw().Before("gorm:raw").Register("test:fail-release", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "SET owner_token = ''") && (n < 0 || left.Add(-1) >= 0) {
			_ = tx.AddError(errors.New("test: the database link is cut"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A release that fails once is tried again: the key is released, and a
// corrected request with the same key runs at once.
func TestFailedReleaseIsRetried(t *testing.T) {
	h := newHarness(t, withWait(0))
	failReleases(t, h.db, 1)
	wantAnswer(t, h.do(call{key: "k", body: `{"card":"a"}`, path: "/widgets/1?status=502"}), http.StatusBadGateway, false)
	h.wantKeys("alice/k=released")
	wantAnswer(t, h.do(call{key: "k", body: `{"card":"b"}`}), http.StatusCreated, false)
	h.wantRuns("/widgets/1", 2)
}

// A release that never succeeds leaves the key in progress, held by nobody
// once its lease passes. It then counts as released: a corrected request
// for the same target takes the operation over (same derived key), the
// listing calls it released, and another target is still refused.
func TestKeyWhoseReleaseFailedIsFreeOnceItsLeasePasses(t *testing.T) {
	h := newHarness(t, withWait(0))
	failReleases(t, h.db, -1)
	wantAnswer(t, h.do(call{key: "k", body: `{"card":"a"}`, path: "/widgets/1?status=502"}), http.StatusBadGateway, false)
	h.wantKeys("alice/k=in_progress")
	// Until the lease passes, the attempt may still be running somewhere.
	wantProblem(t, h.do(call{key: "k", body: `{"card":"b"}`}), refuseKeyReused)
	wantProblem(t, h.do(call{key: "k", body: `{"card":"a"}`, path: "/widgets/1?status=502"}), refuseInProgress)
	h.clock.Advance(h.lease)
	if k, _ := h.key("alice", "k"); !k.Lapsed(h.now().UTC().Truncate(time.Microsecond)) {
		t.Fatalf("key %+v is not free once its lease passed", k)
	}
	wantProblem(t, h.do(call{key: "k", body: `{"card":"b"}`, path: "/widgets/2"}), refuseKeyReused)
	wantAnswer(t, h.do(call{key: "k", body: `{"card":"b"}`}), http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if derived[0] != derived[1] {
		t.Fatalf("the corrected retry ran as another operation: %v", derived)
	}
	h.wantKeys("alice/k=completed")
}

// A flush cut off while it waits for a lock another transaction holds ends at once and
// writes nothing; its counts, kept, are written once by the next flush. On PostgreSQL the
// statement waits for a row lock; on SQLite the shared transaction's begin waits for the
// writer's one connection. (SQLite's busy handler, when another process holds the file's
// write lock, is not cut off: it waits until the lock frees, up to its timeout.)
func TestAFlushCutOffWaitingForALockCountsOnce(t *testing.T) {
	h := newHarness(t)
	h.mw.replays.stop() // no background flush: this test's flushes alone
	<-h.mw.replays.done
	wantAnswer(t, h.do(call{key: "k", body: `{}`}), http.StatusCreated, false)
	k, _ := h.key("alice", "k")
	h.mw.replays.add(replayOfKey(k))
	if err := h.mw.replays.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	lock := lockReplayCount(t, h.db, k.ID)
	h.mw.replays.add(replayOfKey(k))
	ctx, cancel := context.WithCancel(context.Background())
	flushed := make(chan error, 1)
	go func() { flushed <- h.mw.replays.flush(ctx) }()
	lock.WaitUntilBlocking(t, "the flush to wait for the lock")
	cancel()
	var err error
	select {
	case err = <-flushed:
	case <-time.After(5 * time.Second):
		t.Fatal("the flush waits on for the lock after its context ended")
	}
	_ = lock.End("ROLLBACK")
	if err == nil {
		t.Fatal("a flush cut off while waiting for a lock reports success")
	}
	if err := h.mw.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := storedReplays(t, h.db, "alice", "k"); n != 2 {
		t.Fatalf("replays = %d after the cut-off flush and Close, want 2", n)
	}
}

// lockReplayCount holds a lock that a flush of the key's count waits for: on PostgreSQL
// the count's row; on SQLite the writer's one connection, in a write transaction.
func lockReplayCount(t *testing.T, db *gorm.DB, keyID uint) *testkit.Locked {
	if db.Dialector.Name() != "postgres" {
		return testkit.Lock(t, db)
	}
	return testkit.Lock(t, db, "SELECT n FROM idempotency_replays WHERE key_id = "+strconv.Itoa(int(keyID))+" FOR UPDATE")
}
