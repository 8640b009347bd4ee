package middleware

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/problem"
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
	wantProblem(t, h.do(c), problem.KeyInProgress) // its lease has not run out yet

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
	wantProblem(t, testkit.Recv(t, first, "the hung attempt's answer"), problem.KeyLeaseLost)
	h.wantKeys("alice/hung=completed")
}
