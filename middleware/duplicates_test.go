package middleware

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/internal/testkit"
)

func TestDuplicateGivesUpAfterWait(t *testing.T) {
	var g *gate
	h := newHarness(t, withWait(100*time.Millisecond), withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
	g = newGate(t, 1)
	c := call{key: "k", body: `{}`}

	aDone := h.async(c)
	testkit.Recv(t, g.entered, "the original in the handler")
	b := h.do(c)
	wantProblem(t, b, refuseInProgress)
	if b.header.Get("Retry-After") != "1" {
		t.Fatalf("409 without Retry-After: %v", b.header)
	}
	h.wantRuns("/widgets/1", 1)

	g.release(1)
	a := testkit.Recv(t, aDone, "the original's answer")
	wantAnswer(t, a, http.StatusCreated, false)
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, true)
	if retry.body != a.body {
		t.Fatalf("retry got %s, want the original's %s", retry.body, a.body)
	}
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
}

// A duplicate that arrives while the original runs waits for it. To know
// the duplicate is waiting before the original is let go, the test's query
// callback reports (on h.probe) when the duplicate has read the key and
// found it in progress.
func TestDuplicateWaitsForTheOriginal(t *testing.T) {
	tests := []struct {
		name     string
		original int // the status the original answers
		replayed bool
	}{
		{"original stored: replayed", http.StatusCreated, true},
		{"original released: the waiter runs", http.StatusBadGateway, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g *gate
			h := newHarness(t, withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }, after: func(c *gin.Context, run int) {
				if run == 1 {
					c.Set(statusKey, tt.original)
				}
			}}))
			g = newGate(t, 1)
			a, b := h.duplicateWhileRunning(g, call{key: "k", body: `{}`})
			wantAnswer(t, a, tt.original, false)
			wantAnswer(t, b, http.StatusCreated, tt.replayed)
			k, _ := h.key("alice", "k")
			if k.State != KeyCompleted || string(k.Body) != b.body {
				t.Fatalf("key = %+v, want completed with %s", k, b.body)
			}
			if tt.replayed {
				if b.body != a.body {
					t.Fatalf("duplicate got %s, want the original's %s", b.body, a.body)
				}
				derived := h.wantRuns("/widgets/1", 1)
				h.wantWidgets(derived[0] + "#1")
				return
			}
			derived := h.wantRuns("/widgets/1", 2)
			if b.run() != 2 || derived[0] != derived[1] {
				t.Fatalf("duplicate answered %s with derived keys %q, want the second run of the same operation", b.body, derived)
			}
			h.wantWidgets(derived[1] + "#2")
		})
	}
}
