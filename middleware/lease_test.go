package middleware

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
)

// A handler that runs longer than the lease keeps its key: the heartbeat
// extends the lease every third of it while the handler runs, so a
// duplicate arriving after the first lease would have passed waits (here:
// gives up with 409) instead of taking over and running the operation a
// second time. The test ticks the heartbeat and moves the clock itself, so
// no scheduling delay can make a tick late.
func TestHeartbeatKeepsASlowHandlersLease(t *testing.T) {
	const lease = time.Minute
	// The gate is made after the harness so that its cleanup, which lets
	// the handler go, runs before the server's, which waits for it.
	var g *gate
	h := newHarness(t, withLease(lease), withWait(0), withDrivenHeartbeat(), withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
	g = newGate(t, 1)
	c := call{key: "slow", body: `{}`}

	aDone := h.async(c)
	testkit.Recv(t, g.entered, "the slow original in the handler")
	beat := testkit.Recv(t, h.heartbeats.started, "the original's heartbeat")
	if beat.every != lease/3 {
		t.Fatalf("the heartbeat ticks every %v, want a third of the %v lease", beat.every, lease)
	}
	claimed, _ := h.key("alice", "slow")
	// Let the original outlive its first lease, ticking as the heartbeat
	// would: each tick moves the lease a whole lease past the clock.
	for range 4 {
		h.clock.Advance(beat.every)
		if n := h.heartbeats.beat(t, beat); n != 1 {
			t.Fatalf("the extension changed %d key rows, want 1", n)
		}
	}
	now := h.mw.now()
	if extended, _ := h.key("alice", "slow"); !now.After(claimed.LockedUntil) || !extended.LockedUntil.Equal(now.Add(lease)) {
		t.Fatalf("claimed until %v, now %v, extended until %v: want the first lease passed and extended to now + lease", claimed.LockedUntil, now, extended.LockedUntil)
	}
	dup := h.do(c)
	wantProblem(t, dup, refuseInProgress)
	h.wantRuns("/widgets/1", 1)

	g.release(1)
	a := testkit.Recv(t, aDone, "the original's answer")
	wantAnswer(t, a, http.StatusCreated, false)
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, true)
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
	h.wantKeys("alice/slow=completed")
	if n := h.heartbeats.extends.Load(); n != 4 {
		t.Fatalf("%d lease extensions, want the 4 ticked", n)
	}
}

// A hold the handler took under its run's name (a payment's on its order)
// lasts as long as the lease: each extension hands Config.ExtendHolds the
// run's Holder and the lease's new end, nothing else. A retry is another
// run of the same operation: its holder has the same derived key and
// another token, so that a run that lost its lease fences none of its
// successor's writes.
func TestHeartbeatExtendsTheRunsHoldsWithItsLease(t *testing.T) {
	type extension struct {
		holder string
		until  time.Time
	}
	extended, holders := make(chan extension, 4), make(chan string, 2)
	var g *gate
	h := newHarness(t, withDrivenHeartbeat(), withExtendHolds(func(_ context.Context, holder string, until time.Time) error {
		extended <- extension{holder, until}
		return nil
	}), withHooks(hooks{
		before: func(c *gin.Context, run int) {
			holders <- Current(c).Holder()
			g.block(c, run)
		},
		after: func(c *gin.Context, run int) {
			if run == 1 {
				c.Set(statusKey, http.StatusServiceUnavailable) // released: the retry runs again
			}
		},
	}))
	g = newGate(t, 2)
	c := call{key: "hold", body: `{}`}

	wantAnswer(t, h.do(c), http.StatusServiceUnavailable, false)
	first := testkit.Recv(t, holders, "the first run's holder")
	testkit.Recv(t, h.heartbeats.started, "the first run's heartbeat")
	done := h.async(c)
	second := testkit.Recv(t, holders, "the retry's holder")
	testkit.Recv(t, g.entered, "the retry in the handler")
	beat := testkit.Recv(t, h.heartbeats.started, "the retry's heartbeat")
	derived := h.wantRuns("/widgets/1", 2)
	if first == second || !strings.HasPrefix(first, derived[0]+"/") || !strings.HasPrefix(second, derived[1]+"/") {
		t.Fatalf("holders %q then %q; want two runs of %q", first, second, derived[0])
	}
	for range 2 {
		h.clock.Advance(beat.every)
		if n := h.heartbeats.beat(t, beat); n != 1 {
			t.Fatalf("the extension changed %d key rows, want 1", n)
		}
		got := testkit.Recv(t, extended, "the hold's extension")
		if k, _ := h.key("alice", "hold"); got.holder != second || !got.until.Equal(k.LockedUntil) {
			t.Fatalf("extended %q until %v; want %q until the lease's end %v", got.holder, got.until, second, k.LockedUntil)
		}
	}
	g.release(2)
	wantAnswer(t, testkit.Recv(t, done, "the retry's answer"), http.StatusCreated, false)
	h.wantWidgets(derived[1] + "#2")
	if len(extended) != 0 {
		t.Fatalf("%d extensions more than the 2 ticked", len(extended))
	}
}

// The heartbeat is fenced like the completion: once a retry has taken the
// key over, the late attempt's heartbeat extends nothing, so it cannot keep
// the new owner's lease alive nor take the key back.
func TestHeartbeatIsFencedByTheOwner(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	k := IdempotencyKey{
		Scope: "alice", Key: "k", OperationID: "op", Method: "POST", Route: "/widgets/:id", Fingerprint: "f",
		State: KeyInProgress, OwnerToken: "new-owner", LockedUntil: now.Add(time.Minute), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if err := h.db.Create(&k).Error; err != nil {
		t.Fatal(err)
	}
	held, err := h.mw.store.extend(t.Context(), IdempotencyKey{Scope: "alice", Key: "k", OwnerToken: "old-owner"}, now.Add(time.Hour))
	if err != nil || held {
		t.Fatalf("extend by the old owner = %v, %v; want not held", held, err)
	}
	if got, _ := h.key("alice", "k"); !got.LockedUntil.Equal(k.LockedUntil) || got.OwnerToken != "new-owner" {
		t.Fatalf("key after the old owner's heartbeat: %+v", got)
	}
	held, err = h.mw.store.extend(t.Context(), IdempotencyKey{Scope: "alice", Key: "k", OwnerToken: "new-owner"}, now.Add(2*time.Minute))
	if err != nil || !held {
		t.Fatalf("extend by the owner = %v, %v; want held", held, err)
	}
}

// A late attempt that fails after it was taken over does not answer with its
// own failure either: the key is the retry's, so the late client is told to
// ask again (409 lease lost) and gets the retry's answer, and the late
// attempt's release leaves the retry's key alone.
func TestLateFailureAfterTakeoverIsFenced(t *testing.T) {
	var g *gate
	h := newHarness(t, withHooks(hooks{
		before: func(c *gin.Context, run int) { g.block(c, run) },
		after: func(c *gin.Context, run int) {
			if run == 1 {
				c.Set(statusKey, http.StatusBadGateway)
			}
		},
	}))
	g = newGate(t, 1)
	c := call{key: "k", body: `{}`}

	aDone := h.async(c)
	testkit.Recv(t, g.entered, "attempt A in the handler")
	h.clock.Advance(2 * time.Minute) // past A's one-minute lease
	b := h.do(c)
	wantAnswer(t, b, http.StatusCreated, false)

	g.release(1)
	a := testkit.Recv(t, aDone, "attempt A's answer")
	wantProblem(t, a, refuseLeaseLost)
	if a.header.Get("Retry-After") != "1" {
		t.Fatalf("lease-lost answer without Retry-After: %v", a.header)
	}
	h.wantKeys("alice/k=completed")
	derived := h.wantRuns("/widgets/1", 2)
	h.wantWidgets(derived[1] + "#2")
	again := h.do(c)
	wantAnswer(t, again, http.StatusCreated, true)
	if again.body != b.body {
		t.Fatalf("retry got %s, want B's answer %s", again.body, b.body)
	}
}

// The heartbeat stops when the handler's transaction begins: on SQLite an
// extension would wait for that transaction's write lock while the
// transaction waits for the handler to end — the request would hang for
// the busy timeout. The transaction holds only local writes, so it is
// short. The heartbeat is ticked before the transaction; by the time Tx has
// begun it, the heartbeat has stopped its ticker, a tick finds nobody, and
// no extension ran since.
func TestHeartbeatStopsWhenTheTransactionBegins(t *testing.T) {
	type atTx struct {
		stopped bool
		extends int64
	}
	beforeTx, inTx := make(chan struct{}), make(chan atTx, 1)
	letTx, letEnd := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	var h *harness
	var beat *heartbeat // set before letTx is closed
	h = newHarness(t, withDrivenHeartbeat(), withHooks(hooks{
		before: func(*gin.Context, int) { close(beforeTx); <-letTx },
		after: func(*gin.Context, int) {
			got := atTx{extends: h.heartbeats.extends.Load()}
			select {
			case <-beat.stopped:
				got.stopped = true
			default:
			}
			inTx <- got
			<-letEnd
		},
	}))
	// After the harness, so that letting the handler go comes before the
	// server's cleanup, which waits for it.
	t.Cleanup(func() { once1.Do(func() { close(letTx) }); once2.Do(func() { close(letEnd) }) })
	c := call{key: "tx", body: `{}`}

	done := h.async(c)
	testkit.Recv(t, beforeTx, "the handler before its transaction")
	beat = testkit.Recv(t, h.heartbeats.started, "the heartbeat")
	h.clock.Advance(beat.every)
	if n := h.heartbeats.beat(t, beat); n != 1 {
		t.Fatalf("the extension before the transaction changed %d key rows, want 1", n)
	}
	once1.Do(func() { close(letTx) })
	got := testkit.Recv(t, inTx, "the handler with its transaction open")
	if !got.stopped || got.extends != 1 {
		t.Fatalf("with the transaction begun: heartbeat stopped %v after %d extensions; want stopped after the 1 ticked", got.stopped, got.extends)
	}
	select {
	case beat.c <- time.Time{}:
		t.Fatal("the heartbeat took a tick while the transaction was open")
	default:
	}
	// The transaction outlives the lease, and still completes.
	h.clock.Advance(2 * time.Minute)
	once2.Do(func() { close(letEnd) })
	wantAnswer(t, testkit.Recv(t, done, "the answer"), http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
	h.wantKeys("alice/tx=completed")
	if n := h.heartbeats.extends.Load(); n != 1 {
		t.Fatalf("%d lease extensions, want only the 1 before the transaction", n)
	}
}

// heartbeats drives the heartbeats of a harness: each one the middleware
// starts arrives on started and ticks only when the test says; every
// extension of a lease is counted.
type heartbeats struct {
	started  chan *heartbeat
	extends  atomic.Int64
	extended chan int64 // the key rows each extension changed
}

// heartbeat is one started heartbeat's ticker.
type heartbeat struct {
	every   time.Duration // the interval the middleware asked for
	c       chan time.Time
	stopped chan struct{} // closed when the heartbeat stopped its ticker
}

func withDrivenHeartbeat() option {
	return func(h *harness) {
		b := &heartbeats{started: make(chan *heartbeat, 4), extended: make(chan int64, 16)}
		err := h.db.Callback().Raw().After("gorm:raw").Register("test:extend", func(tx *gorm.DB) {
			if strings.HasPrefix(tx.Statement.SQL.String(), "UPDATE idempotency_keys SET locked_until") {
				b.extends.Add(1)
				b.extended <- tx.RowsAffected
			}
		})
		if err != nil {
			h.t.Fatal(err)
		}
		h.heartbeats = b
	}
}

func (b *heartbeats) start(every time.Duration) (<-chan time.Time, func()) {
	beat := &heartbeat{every: every, c: make(chan time.Time), stopped: make(chan struct{})}
	b.started <- beat
	return beat.c, func() { close(beat.stopped) }
}

// beat ticks the heartbeat once and waits for the extension the tick made;
// it returns the key rows the extension changed.
func (b *heartbeats) beat(t *testing.T, beat *heartbeat) int64 {
	t.Helper()
	select {
	case beat.c <- time.Time{}:
	case <-beat.stopped:
		t.Fatal("the heartbeat stopped before it was ticked")
	case <-time.After(5 * time.Second):
		t.Fatal("timed out ticking the heartbeat")
	}
	return testkit.Recv(t, b.extended, "the lease's extension")
}
