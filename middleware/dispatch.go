package middleware

// The state machine of one key. A key row is in one of these states, and
// only the single atomic statements of the store (claim, takeover, extend,
// complete, release, sweep) move it. execute, below, reads the state and
// dispatches: replay, refuse, wait, or claim and run in the route's mode.
//
// Two-phase (Require): the claim commits on its own, before the handler
// runs, so other requests see the key in progress:
//
//	absent ──claim──▶ in progress ──complete──▶ completed ──replay──▶ (same answer)
//	                    │      ▲
//	            release │      │ takeover: a retry; a stalled lease, taken over
//	                    ▼      │
//	                  released ┘
//
//	expired (TTL passed, nobody holds it) ──claim──▶ in progress, a new operation
//
// Atomic (RequireAtomic): the claim, the handler's writes and the
// completion are one transaction, so no other request ever sees the key in
// progress; a duplicate waits for that transaction on the key's unique index
// (PostgreSQL) or the write lock (SQLite), then looks again:
//
//	absent ──claim · writes · complete: one commit──▶ completed ──replay──▶ (same answer)
//	   ▲                 │
//	   └──── rollback ───┘ an answer not kept, a panic, a crash: never claimed
//
//	expired ──the same, in one transaction──▶ completed, a new operation
//	released, stalled (left by a two-phase attempt) ──takeover, in the transaction──▶ completed

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// claimFunc makes the request the key's owner on the store given, and returns the key's row id;
// 0 when another got there first.
type claimFunc func(store, context.Context) (uint, error)

type lookup struct {
	found IdempotencyKey // the zero key when there is no row
	err   error
}

func (m *Idempotency) lookup(ctx context.Context, scope, key string) *lookup {
	found, _, err := m.store.find(ctx, scope, key)
	return &lookup{found, err}
}

// execute reads the key, then claims and runs, replays, waits or refuses; first is dispatch's read.
func (m *Idempotency) execute(c *gin.Context, want IdempotencyKey, mode Mode, raw [sha256.Size]byte, first *lookup) {
	ctx := c.Request.Context()
	waitUntil := time.Now().Add(m.cfg.Wait)
	delay := m.poll
	sk := scopedKey{want.Scope, want.Key}
	for waited := false; ; waited = true {
		if a, ok := m.answers.get(sk); ok {
			if sameRequest(a.fingerprint, want) {
				m.replay(c, a, fromMemory, waited)
			} else {
				m.mismatch(c, want.Route, a.method, a.route)
			}
			return
		}
		if first == nil {
			first = m.lookup(ctx, want.Scope, want.Key)
		}
		found, err := first.found, first.err
		first = nil
		if err != nil && ctx.Err() != nil {
			c.AbortWithStatus(StatusClientClosed) // the client left before anything was claimed
			return
		}
		if err != nil {
			m.internal(c, "find key", err)
			return
		}
		now := m.now()
		at := phaseOf(found, now) // a row not found is the zero key: claimable
		if at != phaseClaimable &&
			!sameRequest(found.Fingerprint, want) && !(found.Lapsed(now) && found.Target == want.Target) {
			// A released (or lapsed) key takes a corrected body, for the same
			// target only: its operation and derived key stay with it.
			m.mismatch(c, want.Route, found.Method, found.Route)
			return
		}
		if at == phaseCompleted {
			m.replayStored(c, found, raw, waited)
			return
		}
		var claim claimFunc
		if want, claim = m.claimFor(at, want, found, now); claim != nil {
			ran, blocked := false, false
			if mode == Atomic {
				ran, blocked = m.runAtomic(c, want, raw, claim, claimOutcome[at], waitUntil)
			} else {
				ran = m.runTwoPhase(c, want, raw, claim, claimOutcome[at])
			}
			if ran || c.IsAborted() {
				return
			}
			if blocked && time.Now().Before(waitUntil) {
				continue // the transaction the claim waited for has ended: look again at once
			}
		}
		// Held, or another request won the race: look again after a pause.
		if !time.Now().Before(waitUntil) {
			m.observe(ctx, want.Route, OutcomeInProgress)
			m.cfg.Refuse(c, refuseInProgress.with("The original request is still running; retry with the same key to get its answer."))
			return
		}
		if !m.sleep(ctx, sk, min(delay, time.Until(waitUntil))) {
			c.AbortWithStatus(StatusClientClosed) // the client left; nobody is waiting for an answer
			return
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// claimFor is the key this request would own at phase at, and the statement
// that makes it the owner (nil when held); a takeover keeps the operation.
func (m *Idempotency) claimFor(at phase, want, found IdempotencyKey, now time.Time) (IdempotencyKey, claimFunc) {
	switch at {
	case phaseClaimable:
		want.OperationID, want.OwnerToken = uuid.NewString(), uuid.NewString()
		want.State, want.CreatedAt = KeyInProgress, now
		want.LockedUntil, want.ExpiresAt = now.Add(m.cfg.Lease), now.Add(m.cfg.TTL)
		w := want // the caller's loop may rewrite want while an abandoned claim still runs
		return want, func(s store, ctx context.Context) (uint, error) { return s.claim(ctx, w) }
	case phaseReleased, phaseStalled:
		want.ID, want.OperationID, want.OwnerToken, want.LockedUntil = found.ID, found.OperationID, uuid.NewString(), now.Add(m.cfg.Lease)
		want.CreatedAt, want.ExpiresAt = found.CreatedAt, found.ExpiresAt
		w, previous := want, found.OwnerToken
		return want, func(s store, ctx context.Context) (uint, error) {
			if took, err := s.takeover(ctx, w, previous, now); !took || err != nil {
				return 0, err
			}
			return w.ID, nil
		}
	}
	return want, nil // held: another attempt runs
}

var claimOutcome = map[phase]Outcome{phaseClaimable: OutcomeClaimed, phaseReleased: OutcomeRetried, phaseStalled: OutcomeTakenOver}

func (m *Idempotency) mismatch(c *gin.Context, route, firstMethod, firstRoute string) {
	m.observe(c.Request.Context(), route, OutcomeMismatch)
	m.cfg.Refuse(c, refuseKeyReused.with(fmt.Sprintf("The key was first used for %s %s with another body or query.", firstMethod, firstRoute)))
}

// sleep waits d, or until this instance's attempt on k ends; false if the client left.
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
	phaseClaimable phase = iota // no row, or past its TTL and held by nobody: claim it as a new operation
	phaseHeld                   // in progress under a live lease: wait for its answer
	phaseCompleted              // its answer is stored: replay it
	phaseReleased               // in progress, no owner: retry it at once as the same operation
	phaseStalled                // in progress, its lease passed (the attempt died): take it over
)

// phaseOf classifies a key found at now, each case narrowing the last: a
// lease still running holds a key whoever owns it (a release written by an
// instance whose clock runs ahead is waited out, as takeover would refuse it).
func phaseOf(k IdempotencyKey, now time.Time) phase {
	switch {
	case claimable(k, now):
		return phaseClaimable
	case k.State == KeyCompleted:
		return phaseCompleted
	case k.LockedUntil.After(now):
		return phaseHeld
	case k.Released():
		return phaseReleased
	default:
		return phaseStalled
	}
}

// claimable: expired and held by nobody, a key may name a new operation (claimableSQL says it in SQL).
func claimable(k IdempotencyKey, now time.Time) bool {
	return !k.ExpiresAt.After(now) && (k.State == KeyCompleted || !k.LockedUntil.After(now))
}

// waitlist wakes the duplicates waiting here once the attempt on their key here ends (one elsewhere
// is polled), and holds the keys an atomic request here runs: a duplicate then waits to be woken,
// not on the database, holding a connection.
type waitlist struct {
	mu      sync.Mutex
	m       map[scopedKey]*waiters
	running map[scopedKey]bool
}

type scopedKey struct{ scope, key string }

type waiters struct {
	woken chan struct{}
	n     int
}

func (w *waitlist) join(k scopedKey) *waiters {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[scopedKey]*waiters{}
	}
	ws := w.m[k]
	if ws == nil {
		ws = &waiters{woken: make(chan struct{})}
		w.m[k] = ws
	}
	ws.n++
	return ws
}

func (w *waitlist) leave(k scopedKey, ws *waiters) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws.n--
	if ws.n == 0 && w.m[k] == ws {
		delete(w.m, k)
	}
}

func (w *waitlist) wake(k scopedKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.m[k]; ws != nil {
		close(ws.woken)
		delete(w.m, k)
	}
}

// start marks k as run by an atomic request here, unless one already is.
func (w *waitlist) start(k scopedKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[k] {
		return false
	}
	if w.running == nil {
		w.running = map[scopedKey]bool{}
	}
	w.running[k] = true
	return true
}

func (w *waitlist) stop(k scopedKey) {
	w.mu.Lock()
	delete(w.running, k)
	w.mu.Unlock()
	w.wake(k)
}
