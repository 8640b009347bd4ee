package middleware

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// A duplicate waiting for an original that runs in the same instance is
// woken when the original ends, not at its next poll: with the poll set to
// an hour, it still answers at once.
func TestWaiterIsWokenWhenTheOriginalEnds(t *testing.T) {
	for _, tt := range []struct {
		name     string
		original int
		replayed bool
	}{
		{"original stored: the waiter replays", http.StatusCreated, true},
		{"original released: the waiter runs", http.StatusBadGateway, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var g *gate
			h := newHarness(t, withWait(30*time.Second), withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }, after: func(c *gin.Context, run int) {
				if run == 1 {
					c.Set(statusKey, tt.original)
				}
			}}))
			g = newGate(t, 1)
			h.mw.poll = time.Hour
			a, b := h.duplicateWhileRunning(g, call{key: "k", body: `{}`})
			wantAnswer(t, a, tt.original, false)
			wantAnswer(t, b, http.StatusCreated, tt.replayed)
			h.wantRuns("/widgets/1", map[bool]int{true: 1, false: 2}[tt.replayed])
		})
	}
}

// The waitlist forgets a key once nobody waits for it, woken or not, and a
// waiter leaving late does not drop the waiters who came after the wake.
func TestWaitlistForgetsKeys(t *testing.T) {
	var w waitlist
	k := scopedKey{"alice", "k"}
	a := w.join(k)
	w.leave(k, a)
	if len(w.m) != 0 {
		t.Fatalf("after leave: %d keys, want 0", len(w.m))
	}
	a = w.join(k)
	w.wake(k)
	select {
	case <-a.woken:
	default:
		t.Fatal("wake did not wake the waiter")
	}
	b := w.join(k)
	w.leave(k, a)
	if w.m[k] != b {
		t.Fatal("a late leave dropped the next waiter")
	}
	w.leave(k, b)
	if len(w.m) != 0 {
		t.Fatalf("after all left: %d keys, want 0", len(w.m))
	}
}
