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
// Real time (the heartbeat ticks on it); the retries are bounded in number,
// and the test asserts who ran, never how long anything took.
func TestHungHandlerLetsItsLeasePassAfterTheTimeout(t *testing.T) {
	const lease, timeout = 200 * time.Millisecond, 400 * time.Millisecond
	var g *gate
	h := newHarness(t, withRealClock(), withLease(lease), withTimeout(timeout), withWait(0),
		withHooks(hooks{before: func(c *gin.Context, run int) {
			if run == 1 {
				<-c.Request.Context().Done() // the handler's deadline reached it
			}
			g.block(c, run)
		}}))
	g = newGate(t, 1)
	c := call{key: "hung", body: `{}`}
	first := h.async(c)
	testkit.Recv(t, g.entered, "the first attempt, hung past its timeout")

	var retry answer
	for range 100 {
		if retry = h.do(c); retry.status != http.StatusConflict {
			break
		}
		wantProblem(t, retry, problem.KeyInProgress)
		time.Sleep(lease / 2)
	}
	wantAnswer(t, retry, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if derived[0] != derived[1] {
		t.Fatalf("the retry ran as another operation: %v", derived)
	}
	g.release(1)
	wantProblem(t, testkit.Recv(t, first, "the hung attempt's answer"), problem.KeyLeaseLost)
	h.wantKeys("alice/hung=completed")
}
