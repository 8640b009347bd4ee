package middleware

// The two-phase run (Require): the claim commits on its own, then the
// handler runs under the claim's lease, which its heartbeat extends.

import (
	"context"
	"crypto/sha256"

	"github.com/gin-gonic/gin"
)

// runTwoPhase commits the claim on its own, then runs the handler: false
// when another request had claimed the key first. The claim runs detached:
// a client gone mid-statement must not leave a claim committed behind an
// error, or an error for a claim it made.
func (m *Idempotency) runTwoPhase(c *gin.Context, want IdempotencyKey, raw [sha256.Size]byte, claim claimFunc, outcome Outcome) bool {
	claimed, err := claim(m.store, context.WithoutCancel(c.Request.Context()))
	if err != nil {
		m.internal(c, "claim key", err)
		return false
	}
	if !claimed {
		return false
	}
	m.observe(c.Request.Context(), want.Route, outcome)
	ctx, cancel, detached := m.attemptContext(c)
	defer cancel()
	op := m.newOperation(ctx, want, raw)
	op.fresh = outcome == OutcomeClaimed
	op.stopHeartbeat = m.heartbeat(ctx, op)
	m.run(c, ctx, detached, op)
	return true
}
