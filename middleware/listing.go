package middleware

import (
	"context"
	"time"
)

// KeyPosition is where a page of a scope's keys ended: the creation time
// and id of its last key. The next page starts strictly after it.
type KeyPosition struct {
	CreatedAt time.Time
	ID        uint
}

// KeysPage lists up to limit of the scope's keys, newest first, from after
// p (from the newest when p is nil), without their stored answers, with
// the replays this instance counted and has not written yet; more says
// whether any follow.
func (m *Idempotency) KeysPage(ctx context.Context, scope string, p *KeyPosition, limit int) (keys []IdempotencyKey, more bool, err error) {
	keys, err = m.replays.withPending(func() ([]IdempotencyKey, error) {
		return m.store.page(ctx, scope, p, limit+1)
	})
	if len(keys) > limit {
		return keys[:limit], true, err
	}
	return keys, false, err
}

// DefaultSweepBatch is how many keys one statement of Sweep deletes when
// it is given no positive batch size.
const DefaultSweepBatch = 500

// Sweep deletes expired keys, in batches of short statements so that
// claims are not held up behind one long delete, and reports how many.
func (m *Idempotency) Sweep(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		batch = DefaultSweepBatch // a batch of 0 would never come back short
	}
	var total int64
	for {
		routes, err := m.store.sweep(ctx, m.now(), batch)
		total += int64(len(routes))
		for _, route := range routes {
			m.cfg.Observe(route, OutcomeSwept)
		}
		if err != nil || len(routes) < batch {
			return total, err
		}
	}
}

// Keys lists the most recent keys of a scope: KeysPage's first page.
func (m *Idempotency) Keys(ctx context.Context, scope string, limit int) ([]IdempotencyKey, error) {
	keys, _, err := m.KeysPage(ctx, scope, nil, limit)
	return keys, err
}
