package middleware

// The heartbeat of a two-phase attempt: it extends the claim's lease while
// the handler runs.

import (
	"context"
	"slices"
	"sync"
	"time"
)

// heartbeat extends the lease every third of its length while the handler
// runs, up to Timeout, so that a slow but live attempt is not taken over;
// only a dead one, or one hung past Timeout, lets its lease pass. Each extension also runs the handler's
// OnLeaseExtended functions. It stops at the first extension that finds the
// key no longer ours: the completion is fenced by the same owner token, so
// that attempt's writes will not commit anyway. The returned function stops
// it and waits until it has. It is called before the handler's transaction
// begins: an extension waiting on the transaction's locks while the
// transaction waits for the handler would wait forever. The transaction
// holds only local writes, so it is short next to the lease.
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
			case <-ctx.Done():
				// Past Timeout: a handler still running is presumed hung;
				// the lease runs out and a retry may take over.
				m.cfg.Logger.WarnContext(ctx, "idempotency: the handler outlived its timeout; its lease is no longer extended", "route", op.key.Route)
				return
			case <-ticks:
			}
			held, err := m.store.extend(ctx, op.key.Scope, op.key.Key, op.key.OwnerToken, m.now().Add(m.cfg.Lease))
			switch {
			case err != nil:
				m.cfg.Logger.ErrorContext(ctx, "extend idempotency lease", "err", err, "route", op.key.Route)
			case !held:
				m.cfg.Logger.WarnContext(ctx, "idempotency lease lost while the handler ran", "route", op.key.Route)
				return
			default:
				op.mu.Lock()
				onExtend := slices.Clone(op.onExtend)
				op.mu.Unlock()
				for _, fn := range onExtend {
					if err := fn(ctx, m.now().Add(m.cfg.Lease)); err != nil {
						m.cfg.Logger.ErrorContext(ctx, "extend a hold with the idempotency lease", "err", err, "route", op.key.Route)
					}
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
