package middleware

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/internal/testkit"
)

// A handler hung past Timeout stops being kept alive: its heartbeat stops,
// its lease runs out, and a retry takes the operation over, with the same
// operation id, instead of getting 409 for as long as the process lives.
// The timeout is real (it is a context deadline) and the handler waits for
// it; the heartbeat is the test's, and the lease runs on the test's clock,
// so nothing waits for time to pass except the handler, for its deadline.
func TestHungHandlerLetsItsLeasePassAfterTheTimeout(t *testing.T) {
	const lease, timeout = time.Minute, 100 * time.Millisecond
	var g *gate
	h := newHarness(t, withLease(lease), withTimeout(timeout), withWait(0), withDrivenHeartbeat(),
		withHooks(hooks{before: func(c *gin.Context, run int) {
			if run == 1 {
				<-c.Request.Context().Done() // the handler's deadline reached it
			}
			g.block(c, run)
		}}))
	g = newGate(t, 1)
	c := call{key: "hung", body: `{}`}
	first := h.async(c)
	beat := testkit.Recv(t, h.heartbeats.started, "the first attempt's heartbeat")
	testkit.Recv(t, g.entered, "the first attempt, hung past its timeout")
	testkit.Recv(t, beat.stopped, "the first attempt's heartbeat to stop at its timeout")
	wantProblem(t, h.do(c), refuseInProgress) // its lease has not run out yet

	h.clock.Advance(lease)
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if derived[0] != derived[1] {
		t.Fatalf("the retry ran as another operation: %v", derived)
	}
	if n := h.heartbeats.extends.Load(); n != 0 {
		t.Fatalf("%d lease extensions, want none: nothing ticked", n)
	}
	g.release(1)
	wantProblem(t, testkit.Recv(t, first, "the hung attempt's answer"), refuseLeaseLost)
	h.wantKeys("alice/hung=completed")
}

// The attempt timeout is written once, here: Config.Timeout, or 4 leases
// when it is zero; the middleware runs its attempts under the same value it
// reports to others (the configuration, the reconciler).
func TestAttemptTimeoutIsTimeoutOrFourLeases(t *testing.T) {
	tests := []struct {
		name           string
		lease, timeout time.Duration
		want           time.Duration
	}{
		{"zero: four leases", 30 * time.Second, 0, 2 * time.Minute},
		{"negative: four leases", time.Second, -time.Second, 4 * time.Second},
		{"set: itself", 30 * time.Second, 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Lease: tt.lease, Timeout: tt.timeout}
			if got := cfg.AttemptTimeout(); got != tt.want {
				t.Fatalf("Config.AttemptTimeout() = %s, want %s", got, tt.want)
			}
			cfg.CacheBytes = -1 // no cache: nothing is replayed here
			m := New(cfg)
			t.Cleanup(func() {
				if err := m.Close(context.Background()); err != nil {
					t.Errorf("close middleware: %v", err)
				}
			})
			if got := m.AttemptTimeout(); got != tt.want {
				t.Fatalf("Idempotency.AttemptTimeout() = %s, want %s", got, tt.want)
			}
		})
	}
}
