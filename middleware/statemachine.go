package middleware

// The state machine of one key. A key row is in one of these states, and
// only the single atomic statements of the store (claim, takeover, extend,
// complete, release, sweep) move it:
//
//	absent ──claim──▶ in progress ──complete──▶ completed ──replay──▶ (same answer)
//	                    │      ▲
//	            release │      │ takeover: a retry; a stalled lease, taken over
//	                    ▼      │
//	                  released ┘
//
//	expired (TTL passed, nobody holds it) ──claim──▶ in progress, a new operation
//
// In progress: an attempt holds the key under its lease (owner token,
// locked_until), which its heartbeat extends. Released: in progress with no
// owner; the last attempt ended without an answer worth keeping, and the next
// request with the key retries it at once, as the same operation. Stalled:
// in progress, but the lease passed without an extension (the attempt died);
// the next request takes it over, as the same operation. Completed: the
// answer is stored and replayed. Expired: past its TTL and held by nobody;
// the next request claims it as a new operation, with a new operation id.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// execute finds out what the key says and acts on it: run the operation if
// this request claims it, replay the answer if it is done, wait if it is
// running, refuse if the key names another request. An answer this
// instance has cached is replayed, or a mismatch refused, without asking
// the database.
func (m *Idempotency) execute(c *gin.Context, want models.IdempotencyKey, mode Mode, raw [sha256.Size]byte) {
	ctx := c.Request.Context()
	waitUntil := time.Now().Add(m.cfg.Wait)
	delay := m.poll
	sk := scopedKey{want.Scope, want.Key}
	for waited := false; ; waited = true {
		if a, ok := m.answers.get(sk); ok {
			if a.fingerprint != want.Fingerprint {
				m.mismatch(c, want.Route, a.method, a.route)
				return
			}
			m.replay(c, a, waited)
			return
		}
		found, ok, err := m.store.find(ctx, want.Scope, want.Key)
		if err != nil && ctx.Err() != nil {
			c.AbortWithStatus(statusClientClosed) // the client left before anything was claimed
			return
		}
		if err != nil {
			m.internal(c, "find key", err)
			return
		}
		now := m.now()
		at := phaseAbsent
		if ok {
			at = phaseOf(found, now)
		}
		if at != phaseAbsent && at != phaseExpired &&
			found.Fingerprint != want.Fingerprint && !(found.Lapsed(now) && found.Target == want.Target) {
			// A released key takes a corrected body, but only for the same
			// target: its operation, and the derived key, stay with it. A
			// lapsed lease counts as released: its release may have failed.
			m.mismatch(c, want.Route, found.Method, found.Route)
			return
		}
		var claim func(store, context.Context) (bool, error)
		switch at {
		case phaseAbsent, phaseExpired:
			want.OperationID, want.OwnerToken = uuid.NewString(), uuid.NewString()
			want.State, want.CreatedAt = models.KeyInProgress, now
			want.LockedUntil, want.ExpiresAt = now.Add(m.cfg.Lease), now.Add(m.cfg.TTL)
			w := want // the loop may rewrite want while an abandoned claim still runs
			claim = func(s store, ctx context.Context) (bool, error) { return s.claim(ctx, w) }
		case phaseCompleted:
			a, err := answerOf(found)
			if err != nil {
				m.internal(c, "decode stored response", err)
				return
			}
			a.raw = raw
			m.answers.put(sk, a)
			m.replay(c, a, waited)
			return
		case phaseReleased, phaseStalled:
			want.OperationID, want.OwnerToken, want.LockedUntil = found.OperationID, uuid.NewString(), now.Add(m.cfg.Lease)
			want.CreatedAt, want.ExpiresAt = found.CreatedAt, found.ExpiresAt
			w, previous := want, found.OwnerToken
			claim = func(s store, ctx context.Context) (bool, error) { return s.takeover(ctx, w, previous, now) }
		case phaseHeld:
			// Another attempt runs: wait for its answer below.
		}
		if claim != nil {
			outcome := OutcomeClaimed
			switch at {
			case phaseReleased:
				outcome = OutcomeRetried
			case phaseStalled:
				outcome = OutcomeTakenOver
			}
			var ran, blocked bool
			switch {
			case mode == Atomic && !m.local.enter(sk):
				// This instance is claiming or running the key already:
				// wait for it below, woken when it ends.
			case mode == Atomic:
				ran, blocked = func() (bool, bool) {
					defer func() { m.local.leave(sk); m.waits.wake(sk) }() // a panic too
					return m.runAtomic(c, want, raw, claim, outcome, waitUntil)
				}()
			default:
				ran = m.runTwoPhase(c, want, raw, claim, outcome)
			}
			if ran || c.IsAborted() {
				return
			}
			if blocked {
				// The claim waited for another transaction on the key (or,
				// on SQLite, for the write lock): it has ended, so look again
				// at once, unless the wait is over.
				if time.Now().Before(waitUntil) {
					continue
				}
			}
		}
		// Held, or another request won the race to claim or take over:
		// look again after a pause, until the wait is over.
		if !time.Now().Before(waitUntil) {
			m.cfg.Observe(want.Route, OutcomeInProgress)
			p := problem.KeyInProgress.With("The original request is still running; retry with the same key to get its answer.")
			p.RetryAfter = 1
			m.cfg.Render(c, p)
			return
		}
		if !m.sleep(ctx, sk, min(delay, time.Until(waitUntil))) {
			c.AbortWithStatus(statusClientClosed) // the client left; nobody is waiting for an answer
			return
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// mismatch refuses a request whose key was first used for another.
func (m *Idempotency) mismatch(c *gin.Context, route, firstMethod, firstRoute string) {
	m.cfg.Observe(route, OutcomeMismatch)
	m.cfg.Render(c, problem.KeyReused.With(fmt.Sprintf("The key was first used for %s %s with another body or query.", firstMethod, firstRoute)))
}

// runTwoPhase commits the claim on its own, then runs the handler: false
// when another request had claimed the key first. The claim runs detached:
// a client gone mid-statement must not leave a claim committed behind an
// error, or an error for a claim it made.
func (m *Idempotency) runTwoPhase(c *gin.Context, want models.IdempotencyKey, raw [sha256.Size]byte, claim func(store, context.Context) (bool, error), outcome Outcome) bool {
	claimed, err := claim(m.store, context.WithoutCancel(c.Request.Context()))
	if err != nil {
		m.internal(c, "claim key", err)
		return false
	}
	if !claimed {
		return false
	}
	m.cfg.Observe(want.Route, outcome)
	ctx, cancel, detached := m.attemptContext(c)
	defer cancel()
	op := m.newOperation(ctx, want, raw)
	op.stopHeartbeat = m.heartbeat(ctx, op)
	m.run(c, ctx, detached, op)
	return true
}

// runAtomic begins the operation's transaction, claims the key in it and
// runs the handler in it: the claim, the business writes and the completion
// commit together, or not at all. ran is false when another request holds
// the key; blocked, when the claim waited for another transaction to end
// (a duplicate's, whose outcome a new look will find). The claim waits at
// most until waitUntil; then, or when the client leaves first, the request
// is answered here.
func (m *Idempotency) runAtomic(c *gin.Context, want models.IdempotencyKey, raw [sha256.Size]byte, claim func(store, context.Context) (bool, error), outcome Outcome, waitUntil time.Time) (ran, blocked bool) {
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

	// Begun and claimed on its own goroutine, so that the gate answers in
	// time even where the wait cannot be interrupted (SQLite's busy wait
	// for the write lock): a transaction begun after the gate closed is
	// rolled back by database/sql, as its context has ended.
	type claimed struct {
		tx  *gorm.DB
		ok  bool
		err error
	}
	result := make(chan claimed, 1)
	start := time.Now()
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
		result <- claimed{tx, ok, claimErr}
	}()
	var r claimed
	got := false
	select {
	case r = <-result:
		got = true
	case <-gated.Done():
	}
	blocked = time.Since(start) > m.poll
	if !got || !gate.CompareAndSwap(armed, closed) {
		gate.CompareAndSwap(armed, timedOut) // the attempt's own deadline came first
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
		if gate.Load() == left {
			c.AbortWithStatus(statusClientClosed)
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
	m.cfg.Observe(want.Route, outcome)
	op := m.newOperation(ctx, want, raw)
	op.db, op.tx, op.atomic = tx, tx, true
	op.stopHeartbeat = func() {} // nothing is committed to extend: a crash leaves no claim
	m.run(c, ctx, detached, op)
	return true, false
}

// minClaimWait is the least time an atomic claim is given to begin its
// transaction and claim, waits included, whatever Config.Wait says: the
// wait cannot tell a duplicate's transaction from any other that holds the
// database (SQLite's write lock), and a request nobody else holds up must
// not be answered 409.
const minClaimWait = time.Second

// attemptContext is the context of one attempt. From the claim on, the
// operation runs to its recorded end even if the client disconnects: a
// charge must not be left half-recorded. The handler, its transaction and
// the recording of its outcome share Timeout (the transaction is begun on
// ctx, and database/sql rolls it back when ctx ends): an attempt that
// outlives it is not recorded late but rolled back and released, which runs
// on detached, without a limit.
func (m *Idempotency) attemptContext(c *gin.Context) (ctx context.Context, cancel context.CancelFunc, detached context.Context) {
	detached = context.WithoutCancel(c.Request.Context())
	ctx, cancel = context.WithTimeout(detached, m.cfg.Timeout)
	return ctx, cancel, detached
}

func (m *Idempotency) newOperation(ctx context.Context, k models.IdempotencyKey, raw [sha256.Size]byte) *operation {
	return &operation{key: k, raw: raw, db: m.cfg.DB.WithContext(ctx)}
}

// sleep waits for d, or less when the attempt holding k in this instance
// ends first; false when the client left.
func (m *Idempotency) sleep(ctx context.Context, k scopedKey, d time.Duration) bool {
	ws := m.waits.join(k)
	defer m.waits.leave(k, ws)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-ws.woken:
	case <-timer.C:
	}
	return true
}

// now is the clock at the precision both databases store.
func (m *Idempotency) now() time.Time { return m.cfg.Now().UTC().Truncate(time.Microsecond) }

// phase is where a key stands at a moment, as execute acts on it.
type phase int

const (
	phaseAbsent    phase = iota // no row: claim it
	phaseExpired                // past its TTL and held by nobody: claim it as a new operation
	phaseHeld                   // in progress under a live lease: wait for its answer
	phaseCompleted              // its answer is stored: replay it
	phaseReleased               // in progress, no owner, lease over: retry it as the same operation
	phaseStalled                // in progress, its owner's lease passed: take it over as the same operation
)

// phaseOf classifies a key found at now. The cases are tried in order, each
// narrowing the last: an expired key is a new operation whatever it was,
// and a lease still running holds a key whoever owns it (a release written
// by an instance whose clock runs ahead is waited out, as the takeover
// statement would refuse it).
func phaseOf(k models.IdempotencyKey, now time.Time) phase {
	switch {
	case claimable(k, now):
		return phaseExpired
	case k.State == models.KeyCompleted:
		return phaseCompleted
	case k.LockedUntil.After(now):
		return phaseHeld
	case k.Released():
		return phaseReleased
	default:
		return phaseStalled
	}
}

// claimable: the key expired and nobody holds it, so it may name a new
// operation. claimableSQL says the same for the claim and sweep statements;
// TestClaimableAgreesWithTheSQL holds the two together.
func claimable(k models.IdempotencyKey, now time.Time) bool {
	return !k.ExpiresAt.After(now) && (k.State == models.KeyCompleted || !k.LockedUntil.After(now))
}

// run executes the handler as the owner of the key, then records the
// outcome.
func (m *Idempotency) run(c *gin.Context, ctx, detached context.Context, op *operation) {
	c.Request = c.Request.WithContext(ctx)
	c.Set(operationKey, op)
	// Once the outcome is recorded or released, duplicates waiting here look
	// again at once.
	defer m.waits.wake(op.scoped())
	real := c.Writer
	rec := newRecorder(real)
	c.Writer = rec
	defer func() {
		op.stopHeartbeat()
		c.Writer = real
		if p := recover(); p != nil {
			m.release(detached, op)
			panic(p)
		}
	}()
	c.Next()
	op.stopHeartbeat()
	c.Writer = real
	m.record(c, detached, op, rec)
}

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
				m.cfg.Logger.Warn("idempotency: the handler outlived its timeout; its lease is no longer extended", "route", op.key.Route)
				return
			case <-ticks:
			}
			held, err := m.store.extend(ctx, op.key.Scope, op.key.Key, op.key.OwnerToken, m.now().Add(m.cfg.Lease))
			switch {
			case err != nil:
				m.cfg.Logger.Error("extend idempotency lease", "err", err, "route", op.key.Route)
			case !held:
				m.cfg.Logger.Warn("idempotency lease lost while the handler ran", "route", op.key.Route)
				return
			default:
				op.mu.Lock()
				onExtend := slices.Clone(op.onExtend)
				op.mu.Unlock()
				for _, fn := range onExtend {
					if err := fn(ctx, m.now().Add(m.cfg.Lease)); err != nil {
						m.cfg.Logger.Error("extend a hold with the idempotency lease", "err", err, "route", op.key.Route)
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

// record commits the outcome and only then sends it. Outcomes where
// execution began (2xx, 3xx, and 4xx the handler declared final) are kept
// for replay, in the handler's transaction; anything else is rolled back and
// the key released, so that a corrected or later retry runs again. A kept
// answer is cached for this instance's replays once it is committed.
func (m *Idempotency) record(c *gin.Context, ctx context.Context, op *operation, rec *recorder) {
	resp := rec.stored()
	if !(resp.Status < 400 || resp.Status < 500 && op.final) {
		if !m.release(ctx, op) {
			// Fenced: the key is another attempt's now, so this answer is
			// not the operation's, whatever the handler said.
			m.leaseLost(c, op)
			return
		}
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
		return
	}
	db := op.tx
	if db == nil {
		db = op.db
	}
	completed, err := m.store.complete(db, op.key.Scope, op.key.Key, op.key.OwnerToken, resp)
	if err == nil && completed && op.tx != nil {
		err = op.tx.Commit().Error
		op.tx = nil
	}
	switch {
	case err != nil:
		m.release(ctx, op)
		m.internal(c, "record outcome", err)
	case !completed:
		// Fenced: the lease passed and a retry took the key over. This
		// attempt's writes are rolled back; the retry's answer stands.
		op.rollback()
		m.leaseLost(c, op)
	default:
		m.cfg.Observe(op.key.Route, OutcomeStored)
		k := op.key
		m.answers.put(op.scoped(), &cached{
			replayOf: replayOfKey(k), method: k.Method, route: k.Route, fingerprint: k.Fingerprint, raw: op.raw, expiresAt: k.ExpiresAt,
			status: resp.Status, headers: resp.Headers, body: bytes.Clone(resp.Body), // no spare capacity kept
		})
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
	}
}

// releaseTries is how many times release tries to release a key before it
// leaves the key to its lease: a key whose lease lapsed is free (Lapsed).
const releaseTries = 3

// release rolls the attempt back and releases the key: the released state.
// It reports false when the key was no longer this attempt's to release.
// An atomic operation's claim is in its transaction, so the rollback alone
// releases the key: it is as if it had never been claimed.
func (m *Idempotency) release(ctx context.Context, op *operation) bool {
	op.rollback()
	if op.atomic {
		m.cfg.Observe(op.key.Route, OutcomeReleased)
		return true
	}
	var held bool
	var err error
	for try := 1; try <= releaseTries; try++ {
		if held, err = m.store.release(ctx, op.key.Scope, op.key.Key, op.key.OwnerToken, m.now()); err == nil {
			break
		}
		m.cfg.Logger.Error("release idempotency key", "err", err, "try", try)
		if try < releaseTries {
			time.Sleep(time.Duration(try) * 50 * time.Millisecond)
		}
	}
	if err != nil {
		held = true // unknown: the handler's answer is the best there is
	}
	if held {
		m.cfg.Observe(op.key.Route, OutcomeReleased)
	}
	return held
}

// leaseLost answers an attempt that was taken over: its client should ask
// again and get the answer of the attempt that owns the key.
func (m *Idempotency) leaseLost(c *gin.Context, op *operation) {
	m.cfg.Observe(op.key.Route, OutcomeLeaseLost)
	p := problem.KeyLeaseLost.With("Retry with the same key to get the answer of the attempt that finished.")
	p.RetryAfter = 1
	m.cfg.Render(c, p)
}

func (op *operation) rollback() {
	if op.tx != nil {
		op.tx.Rollback()
		op.tx = nil
	}
}

// replay sends the stored answer verbatim, marked as replayed.
func (m *Idempotency) replay(c *gin.Context, a *cached, waited bool) {
	// Counted in memory before the answer goes out, so that what a client
	// has seen is already in the count Keys reports; the row is updated
	// later, in a batch, so a replay writes nothing.
	m.replays.add(a.replayOf)
	outcome := OutcomeReplayed
	if waited {
		outcome = OutcomeWaitedReplayed
	}
	m.cfg.Observe(c.FullPath(), outcome)
	send(c.Writer, a.headers, ReplayedHeader, a.status, a.body)
	c.Abort()
}
