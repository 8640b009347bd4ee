package middleware

// The atomic run (RequireAtomic): claim, writes and completion in one transaction.

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

// minClaimWait is the least an atomic claim is given, whatever Config.Wait says: SQLite's write
// lock may be anyone's, and a request no duplicate holds up must not get a 409 (1s was too little).
const minClaimWait = 5 * time.Second

// runAtomic claims the key in a new transaction and runs the handler in it.
// ran is false when another request holds the key; blocked, when the claim
// waited for another transaction (a duplicate's, which a new look will find).
func (m *Idempotency) runAtomic(c *gin.Context, want IdempotencyKey, raw [sha256.Size]byte, claim claimFunc, outcome Outcome, waitUntil time.Time) (ran, blocked bool) {
	sk := scopedKey{want.Scope, want.Key}
	if !m.waits.start(sk) {
		return false, false // this instance runs the key already: wait to be woken
	}
	defer m.waits.stop(sk)
	ctx, cancel, detached := m.attemptContext(c)
	defer cancel()
	// The transaction lives on gated: ended at once if the claim is given up.
	gated, endGate := context.WithCancel(ctx)
	defer endGate()
	timer := time.NewTimer(max(time.Until(waitUntil), minClaimWait))
	defer timer.Stop()
	start := time.Now()
	result := m.beginAndClaim(gated, claim)
	var r txClaim
	got := false
	select {
	case r = <-result:
		got = true
	case <-timer.C:
	case <-gated.Done(): // the attempt's own deadline came first
	case <-c.Request.Context().Done():
		c.AbortWithStatus(StatusClientClosed)
	}
	if !got {
		endGate()
		go func() {
			if r := <-result; r.tx != nil {
				r.tx.Rollback()
			}
		}()
		return false, true // timed out: the caller looks once more, then answers 409
	}
	switch {
	case r.err != nil:
		m.internal(c, "claim key", r.err)
		return false, false
	case r.id == 0:
		r.tx.Rollback()
		return false, time.Since(start) > m.poll
	}
	want.ID = r.id
	m.observe(ctx, want.Route, outcome)
	// Nothing is committed to extend: a crash leaves no claim.
	op := &operation{key: want, raw: raw, db: r.tx, tx: r.tx, atomic: true, stopHeartbeat: func() {}}
	m.run(c, ctx, detached, op)
	return true, false
}

// txClaim is what beginning and claiming came to: the key's row id, 0 when another holds it;
// tx is nil when err is set.
type txClaim struct {
	tx  *gorm.DB
	id  uint
	err error
}

// beginAndClaim runs on its own goroutine, so that runAtomic answers in time even through SQLite's
// busy wait; a transaction begun after gated ended is rolled back by database/sql.
func (m *Idempotency) beginAndClaim(gated context.Context, claim claimFunc) <-chan txClaim {
	result := make(chan txClaim, 1)
	go func() {
		tx := m.cfg.DB.WithContext(gated).Begin()
		id, err := uint(0), tx.Error
		if err == nil {
			id, err = claim(m.store.on(tx), gated)
		}
		if err != nil {
			tx.Rollback()
			tx = nil
		}
		result <- txClaim{tx, id, err}
	}()
	return result
}
