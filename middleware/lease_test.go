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
