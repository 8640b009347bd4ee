package middleware

// The two-phase run (Require): the claim commits, then the handler runs under its lease.

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// runTwoPhase commits the claim, detached (a client gone mid-statement leaves no claim behind an
// error), then runs the handler; false if another request claimed the key first.
func (m *Idempotency) runTwoPhase(c *gin.Context, want IdempotencyKey, raw [sha256.Size]byte, claim claimFunc, outcome Outcome) bool {
	id, err := claim(m.store, context.WithoutCancel(c.Request.Context()))
	if err != nil {
		m.internal(c, "claim key", err)
		return false
	}
	if id == 0 {
		return false
	}
	want.ID = id
	m.observe(c.Request.Context(), want.Route, outcome)
	ctx, cancel, detached := m.attemptContext(c)
	defer cancel()
	op := &operation{key: want, raw: raw, db: m.cfg.DB.WithContext(ctx), fresh: outcome == OutcomeClaimed}
	op.stopHeartbeat = m.heartbeat(ctx, op)
	m.run(c, ctx, detached, op)
	return true
}

// heartbeat extends the lease (and, once the derived key went out, the run's holds: ExtendHolds)
// every third of it up to Timeout, so that only a dead or hung attempt lets it pass; it stops once
// the key is no longer ours. It is stopped before the handler's transaction begins: an extension
// waiting on its locks would wait forever (local writes only, the transaction is short next to a lease).
func (m *Idempotency) heartbeat(ctx context.Context, op *operation) func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		ticks, stop := m.ticker(max(m.cfg.Lease/3, time.Millisecond))
		defer stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done(): // past Timeout: the lease runs out and a retry may take over
				m.cfg.Logger.WarnContext(ctx, "idempotency: the handler outlived its timeout; its lease is no longer extended", "route", op.key.Route)
				return
			case <-ticks:
			}
			until := m.now().Add(m.cfg.Lease)
			held, err := m.store.extend(ctx, op.key, until)
			switch {
			case err != nil:
				m.cfg.Logger.ErrorContext(ctx, "extend idempotency lease", "err", err, "route", op.key.Route)
			case !held:
				m.cfg.Logger.WarnContext(ctx, "idempotency lease lost while the handler ran", "route", op.key.Route)
				return
			case m.cfg.ExtendHolds != nil && op.handedOut.Load():
				if err := m.cfg.ExtendHolds(ctx, Operation{op}.Holder(), until); err != nil {
					m.cfg.Logger.ErrorContext(ctx, "extend a hold with the idempotency lease", "err", err, "route", op.key.Route)
				}
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-stopped
	})
}

func newTicker(every time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(every)
	return t.C, t.Stop
}
