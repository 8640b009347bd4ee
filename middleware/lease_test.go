package middleware

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/problem"
)

// A handler that runs longer than the lease keeps its key: the heartbeat
// extends the lease while it runs, so a duplicate arriving after the first
// lease would have passed waits (here: gives up with 409) instead of taking
// over and running the operation a second time. Real time, since the
// heartbeat ticks on it; the test counts runs and rows, never durations.
func TestHeartbeatKeepsASlowHandlersLease(t *testing.T) {
	const lease = 600 * time.Millisecond
	// The gate is made after the harness so that its cleanup, which lets
	// the handler go, runs before the server's, which waits for it.
	var g *gate
	h := newHarness(t, withRealClock(), withLease(lease), withWait(0), withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
	g = newGate(t, 1)
	c := call{key: "slow", body: `{}`}

	aDone := h.async(c)
	recv(t, g.entered, "the slow original in the handler")
	claimed, _ := h.key("alice", "slow")
	// Let the original outlive its first lease three times over.
	time.Sleep(3 * lease)
	now := time.Now()
	if extended, _ := h.key("alice", "slow"); !now.After(claimed.LockedUntil) || !extended.LockedUntil.After(claimed.LockedUntil) {
		t.Fatalf("claimed until %v, now %v, extended until %v: want the first lease passed and extended", claimed.LockedUntil, now, extended.LockedUntil)
	}
	dup := h.do(c)
	wantProblem(t, dup, problem.KeyInProgress)
	h.wantRuns("/widgets/1", 1)

	g.release(1)
	a := recv(t, aDone, "the original's answer")
	wantAnswer(t, a, http.StatusCreated, false)
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, true)
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
	h.wantKeys("alice/slow=completed")
}

// The heartbeat is fenced like the completion: once a retry has taken the
// key over, the late attempt's heartbeat extends nothing, so it cannot keep
// the new owner's lease alive nor take the key back.
func TestHeartbeatIsFencedByTheOwner(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	k := IdempotencyKey{
		Scope: "alice", Key: "k", OperationID: "op", Method: "POST", Route: "/widgets/:id", Fingerprint: "f",
		State: StateInProgress, OwnerToken: "new-owner", LockedUntil: now.Add(time.Minute), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if err := h.db.Create(&k).Error; err != nil {
		t.Fatal(err)
	}
	held, err := h.mw.store.extend(t.Context(), "alice", "k", "old-owner", now.Add(time.Hour))
	if err != nil || held {
		t.Fatalf("extend by the old owner = %v, %v; want not held", held, err)
	}
	if got, _ := h.key("alice", "k"); !got.LockedUntil.Equal(k.LockedUntil) || got.OwnerToken != "new-owner" {
		t.Fatalf("key after the old owner's heartbeat: %+v", got)
	}
	held, err = h.mw.store.extend(t.Context(), "alice", "k", "new-owner", now.Add(2*time.Minute))
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
	recv(t, g.entered, "attempt A in the handler")
	h.clock.Advance(2 * time.Minute) // past A's one-minute lease
	b := h.do(c)
	wantAnswer(t, b, http.StatusCreated, false)

	g.release(1)
	a := recv(t, aDone, "attempt A's answer")
	wantProblem(t, a, problem.KeyLeaseLost)
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
// short; here it is held open for two leases and still completes.
func TestHeartbeatStopsWhenTheTransactionBegins(t *testing.T) {
	const lease = 300 * time.Millisecond
	var g *gate
	h := newHarness(t, withRealClock(), withLease(lease), withHooks(hooks{after: func(c *gin.Context, run int) { g.block(c, run) }}))
	g = newGate(t, 1)
	c := call{key: "tx", body: `{}`}

	done := h.async(c)
	recv(t, g.entered, "the handler with its transaction open")
	time.Sleep(2 * lease)
	g.release(1)
	wantAnswer(t, recv(t, done, "the answer"), http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
	h.wantKeys("alice/tx=completed")
}
