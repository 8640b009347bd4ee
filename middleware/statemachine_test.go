package middleware

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/internal/testkit"
)

func TestPanicReleasesTheKey(t *testing.T) {
	h := newHarness(t, withHooks(hooks{after: func(_ *gin.Context, run int) {
		if run == 1 {
			panic("boom")
		}
	}}))
	c := call{key: "k", body: `{}`}

	wantAnswer(t, h.do(c), http.StatusInternalServerError, false)
	h.wantKeys("alice/k=released")
	h.wantWidgets()

	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if retry.run() != 2 || derived[1] != derived[0] {
		t.Fatalf("retry answered %s after derived key %s; want the second run of the same operation", retry.body, derived[0])
	}
	h.wantKeys("alice/k=completed")
	h.wantWidgets(derived[0] + "#2")
}

func TestOutcomes(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		status int
		final  bool
		stored bool
		// forgotten: released by a new operation that found nothing to act
		// on, so its row is deleted and a retry is a new operation.
		forgotten bool
	}{
		{200, false, true, false},
		{201, false, true, false},
		{303, false, true, false},
		{400, false, false, false},
		{401, false, false, false},
		{402, true, true, false},
		{403, false, false, false},
		{404, false, false, true},
		{409, false, false, false},
		{409, true, true, false},
		{422, false, false, false},
		{429, false, false, false},
		{500, false, false, false},
		{500, true, false, false},
		{502, false, false, false},
		{503, true, false, false},
	}
	var wantRows []string
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d final=%v", tt.status, tt.final), func(t *testing.T) {
			path := fmt.Sprintf("/widgets/%d", i)
			query := fmt.Sprintf("?status=%d", tt.status)
			if tt.final {
				query += "&final=1"
			}
			key := fmt.Sprintf("outcome-%d", i)
			c := call{key: key, path: path + query, body: `{}`}

			first := h.do(c)
			wantAnswer(t, first, tt.status, false)
			k, _ := h.key("alice", key)
			if tt.stored {
				if k.State != KeyCompleted || k.Status != tt.status || string(k.Body) != first.body {
					t.Fatalf("stored key = %+v, want completed with %d and the answer", k, tt.status)
				}
			} else if _, found := h.key("alice", key); tt.forgotten && found {
				t.Fatalf("key = %+v, want it forgotten", k)
			} else if !tt.forgotten && (!k.Released() || k.LockedUntil.After(h.clock.Now())) {
				t.Fatalf("key = %+v, want it released: in progress, no owner, lease over", k)
			}

			second := h.do(c)
			derived := h.runs.of(path)
			if tt.stored {
				wantAnswer(t, second, tt.status, true)
				if second.body != first.body || len(derived) != 1 {
					t.Fatalf("replay %q after %d runs, want the original %q after 1", second.body, len(derived), first.body)
				}
				wantRows = append(wantRows, derived[0]+"#1")
				return
			}
			// A released key runs again, as the same operation; a forgotten
			// one as a new operation.
			wantAnswer(t, second, tt.status, false)
			if second.run() != 2 || len(derived) != 2 || (derived[0] == derived[1]) == tt.forgotten {
				t.Fatalf("retry of a released key answered %s with derived keys %q, want a second run of the same operation", second.body, derived)
			}
		})
	}
	// Stored outcomes committed their business row; released ones rolled
	// theirs back.
	h.wantWidgets(wantRows...)
}

// A released key takes the next request with it, even a corrected one:
// it is a retry of the same operation, not a reuse of the key.
func TestReleasedKeyTakesACorrectedRequest(t *testing.T) {
	h := newHarness(t)
	const path = "/widgets/1"
	wantAnswer(t, h.do(call{key: "k", path: path + "?status=422", body: `{"size":-1}`}), 422, false)
	corrected := h.do(call{key: "k", path: path, body: `{"size":1}`})
	wantAnswer(t, corrected, 201, false)
	derived := h.wantRuns(path, 2)
	if derived[0] != derived[1] {
		t.Fatalf("derived keys %q, want one operation", derived)
	}
	h.wantWidgets(derived[1] + "#2")
	// The key now names the corrected request.
	wantAnswer(t, h.do(call{key: "k", path: path, body: `{"size":1}`}), 201, true)
	wantProblem(t, h.do(call{key: "k", path: path + "?status=422", body: `{"size":-1}`}), refuseKeyReused)
}

// A released key takes a corrected body, but not another target: retried
// against another widget (another order to pay), it would carry the first
// operation's derived key, and the provider's first answer, to the wrong
// resource.
func TestReleasedKeyKeepsItsTarget(t *testing.T) {
	h := newHarness(t)
	wantAnswer(t, h.do(call{key: "k", path: "/widgets/1?status=502", body: `{}`}), 502, false)
	wantProblem(t, h.do(call{key: "k", path: "/widgets/2", body: `{}`}), refuseKeyReused)
	wantAnswer(t, h.do(call{key: "k", path: "/widgets/1", body: `{"corrected":true}`}), 201, false)
	h.wantRuns("/widgets/1", 2)
	h.wantRuns("/widgets/2", 0)
}

// An attempt that outlives its lease is taken over by a retry, and its own
// completion is fenced off by the owner token: its writes roll back and
// its client gets 409, whether the retry has finished by then or not.
func TestLeaseTakeoverFencesTheLateAttempt(t *testing.T) {
	tests := []struct {
		name string
		// bBlocks: B is still running (blocked in its handler) when A
		// finishes, so only the owner token, not the state, fences A.
		bBlocks bool
	}{
		{"B finished before A", false},
		{"A finishes while B runs", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The attempts block before they open their transaction: on
			// SQLite an open write transaction would hold the other up for
			// the busy timeout.
			// The gate is made after the harness: its cleanup, which lets the
			// handlers go, then runs before the server's, which waits for them.
			var g *gate
			h := newHarness(t, withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
			g = newGate(t, 1)
			if tt.bBlocks {
				g = newGate(t, 1, 2)
			}
			c := call{key: "k", body: `{"n":1}`}

			aDone := h.async(c)
			testkit.Recv(t, g.entered, "attempt A in the handler")
			h.clock.Advance(2 * time.Minute) // past A's one-minute lease
			bDone := h.async(c)
			var b answer
			if tt.bBlocks {
				testkit.Recv(t, g.entered, "attempt B in the handler")
			} else {
				b = testkit.Recv(t, bDone, "attempt B's answer")
			}

			g.release(1)
			a := testkit.Recv(t, aDone, "attempt A's answer")
			wantProblem(t, a, refuseLeaseLost)
			if a.header.Get("Retry-After") != "1" || a.header.Get("Location") != "" {
				t.Fatalf("A's answer headers %v, want Retry-After and none of the handler's", a.header)
			}
			if tt.bBlocks {
				h.wantKeys("alice/k=in_progress")
				h.wantWidgets()
				g.release(2)
			}
			if tt.bBlocks {
				b = testkit.Recv(t, bDone, "attempt B's answer")
			}
			wantAnswer(t, b, http.StatusCreated, false)
			if b.run() != 2 {
				t.Fatalf("B answered %s, want the handler's second run", b.body)
			}

			derived := h.wantRuns("/widgets/1", 2)
			if derived[0] != derived[1] {
				t.Fatalf("derived keys %q: the takeover must keep the operation", derived)
			}
			h.wantWidgets(derived[1] + "#2") // A's row rolled back
			k, _ := h.key("alice", "k")
			if k.State != KeyCompleted || k.Status != http.StatusCreated || string(k.Body) != b.body {
				t.Fatalf("key = %+v, want completed with B's answer %s", k, b.body)
			}
			third := h.do(c)
			wantAnswer(t, third, http.StatusCreated, true)
			if third.body != b.body {
				t.Fatalf("third request got %s, want B's answer %s", third.body, b.body)
			}
			h.wantRuns("/widgets/1", 2)
		})
	}
}

func TestExpiredKeyIsANewOperation(t *testing.T) {
	h := newHarness(t)
	c := call{key: "k", body: `{}`}
	first := h.do(c)
	wantAnswer(t, first, http.StatusCreated, false)

	h.clock.Advance(time.Hour) // the TTL: expired at exactly its expiry
	second := h.do(c)
	wantAnswer(t, second, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if derived[0] == derived[1] {
		t.Fatalf("derived key %s reused by a new operation", derived[0])
	}
	wantAnswer(t, h.do(c), http.StatusCreated, true)
	h.wantWidgets(derived[0]+"#1", derived[1]+"#2")
	h.wantKeys("alice/k=completed")
}
