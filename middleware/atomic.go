package middleware

// The atomic run (RequireAtomic): the operation's transaction is begun
// first, and the claim, the handler's writes and the completion commit in
// it together, or not at all.

import (
	"context"
	"crypto/sha256"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

// minClaimWait is the least time an atomic claim is given to begin its
// transaction and claim, whatever Config.Wait says: the wait cannot tell a
// duplicate's transaction from any other that holds the database (SQLite's
// write lock), and a request nobody else holds up must not be answered
// 409. A second was too little: 64 writers of one SQLite database, on 2
// loaded cores, queued past it for 2% of their orders.
const minClaimWait = 5 * time.Second

// runAtomic begins the operation's transaction, claims the key in it and
// runs the handler in it. ran is false when another request holds the key;
// blocked, when the claim waited for another transaction to end (a
// duplicate's, whose outcome a new look will find). The claim waits at
// most until waitUntil; then, or when the client leaves first, the request
// is answered here.
func (m *Idempotency) runAtomic(c *gin.Context, want IdempotencyKey, raw [sha256.Size]byte, claim claimFunc, outcome Outcome, waitUntil time.Time) (ran, blocked bool) {
	ctx, cancel, detached := m.attemptContext(c)
	defer cancel()
	// The gate ends the transaction if beginning it or claiming in it
	// waits past waitUntil, or the client leaves meanwhile; once the claim
	// is made, closing the gate disarms it, and the transaction lives on
	// ctx. Whichever comes first wins the swap.
	gated, endGate := context.WithCancel(ctx)
	defer endGate()
	const (
		armed = iota
		closed
		timedOut
		left
	)
	var gate atomic.Int32
	fire := func(why int32) func() {
		return func() {
			if gate.CompareAndSwap(armed, why) {
				endGate()
			}
		}
	}
	timer := time.AfterFunc(max(time.Until(waitUntil), minClaimWait), fire(timedOut))
	defer timer.Stop()
	stopLeft := context.AfterFunc(c.Request.Context(), fire(left))
	defer stopLeft()

	start := time.Now()
	result := m.beginAndClaim(gated, claim)
	var r txClaim
	got := false
	select {
	case r = <-result:
		got = true
	case <-gated.Done():
	}
	blocked = time.Since(start) > m.poll
	if !got || !gate.CompareAndSwap(armed, closed) {
		gate.CompareAndSwap(armed, timedOut) // the attempt's own deadline came first
		abandon(r, got, result)
		if gate.Load() == left {
			c.AbortWithStatus(StatusClientClosed)
		}
		return false, true // timed out: the caller looks once more, then answers 409
	}
	tx := r.tx
	switch {
	case r.err != nil:
		m.internal(c, "claim key", r.err)
		return false, false
	case !r.ok:
		tx.Rollback()
		return false, blocked
	}
	m.observe(ctx, want.Route, outcome)
	op := m.newOperation(ctx, want, raw)
	op.db, op.tx, op.atomic = tx, tx, true
	op.stopHeartbeat = func() {} // nothing is committed to extend: a crash leaves no claim
	m.run(c, ctx, detached, op)
	return true, false
}

// txClaim is what beginning the transaction and claiming in it came to:
// tx is nil when err is set.
type txClaim struct {
	tx  *gorm.DB
	ok  bool
	err error
}

// beginAndClaim begins the transaction on gated and claims in it, on its
// own goroutine, so that the gate answers in time even where the wait
// cannot be interrupted (SQLite's busy wait): a transaction begun after the
// gate closed is rolled back by database/sql, as its context has ended.
func (m *Idempotency) beginAndClaim(gated context.Context, claim claimFunc) <-chan txClaim {
	result := make(chan txClaim, 1)
	go func() {
		tx := m.cfg.DB.WithContext(gated).Begin()
		ok, claimErr := false, tx.Error
		if claimErr == nil {
			ok, claimErr = claim(m.store.on(tx), gated)
		}
		if claimErr != nil {
			tx.Rollback()
			tx = nil
		}
		result <- txClaim{tx, ok, claimErr}
	}()
	return result
}

// abandon rolls back a claim the gate gave up on: r, if it had come (got),
// or whatever still comes on result.
func abandon(r txClaim, got bool, result <-chan txClaim) {
	switch {
	case got && r.tx != nil:
		r.tx.Rollback()
	case !got:
		go func() {
			if r := <-result; r.tx != nil {
				r.tx.Rollback()
			}
		}()
	}
}
