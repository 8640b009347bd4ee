// Package middleware holds the idempotency middleware: one Gin handler that
// makes a retried, double-clicked or redelivered write happen once and
// answers every repeat with the original response. It knows nothing about
// orders or payments.
//
// Create its table (IdempotencyKey, store.go), then mount it with New and
// Require after authentication (Config.Scope names who owns the keys), in
// front of each route that must happen once. A request brings its key in
// the Idempotency-Key header, or a form in its FormKeyField field. The
// middleware answers what it refuses itself (no key, a key reused for
// another request, one still in progress...) through Config.Refuse. The
// handler behind it keeps these rules:
//
//   - write through Tx what must be kept only with the answer: Tx commits
//     with the stored answer, fenced by the key's owner token, or not at
//     all; never commit it yourself;
//   - call out (a payment provider) only before the first Tx, passing
//     DerivedKey, so that every run of the operation sends the same
//     request under the same key;
//   - answer, and declare a 4xx that must be replayed Final;
//   - answer 404 only before anything is done: a new operation answered
//     404, like one that never asked for DerivedKey, is forgotten, its row
//     deleted, so that refused requests leave nothing behind.
//
// A 2xx or 3xx, and a final 4xx, is stored with the writes and replayed to
// every repeat; anything else rolls the writes back and releases the key
// for a retry. dispatch.go draws the states of a key in both modes.
//
// A handler may also commit writes of its own, outside Tx (paying an order
// records its provider attempt before it calls out). A rollback of Tx
// leaves them, and an operation may run more than once (a retry after a
// release, a takeover after a crash or a lapsed lease, a run that lost its
// lease still running), so the handler makes each of them safe on its own:
//
//   - idempotent: keyed by DerivedKey, so that a later run finds what an
//     earlier one committed and carries on from it;
//   - committed before the call out whenever a crash must not forget it, so
//     that a re-run, or a reconciler, asks the provider what became of the
//     attempt rather than charging anew;
//   - fenced by a hold of its own (on the order, say), named by
//     Operation.Holder, extended with the lease by Config.ExtendHolds and
//     checked by every later write, since the owner token fences Tx only;
//     and let go, in its own write, when it answers without keeping Tx's
//     writes.
//
// A route is mounted in one of two modes:
//
//   - Require: two-phase, safe for any handler. The claim commits on its
//     own before the handler runs, and a heartbeat extends its lease, so a
//     handler may call out and a crash mid-call leaves a claim that a retry
//     takes over.
//   - RequireAtomic: the claim, the handler's writes and the completion are
//     one transaction: one commit instead of two. A duplicate in flight
//     waits on the key's unique index (PostgreSQL) or the write lock
//     (SQLite), then replays; a crash or a rollback leaves no claim. Such a
//     handler must call nothing outside the database, since nothing would
//     record that it did.
//
// It needs GORM on PostgreSQL or SQLite. On SQLite under concurrent writes,
// give it one write connection whose transactions begin IMMEDIATE
// (_txlock=immediate): a deferred transaction that reads, then writes after
// another writer committed, fails with "database is locked".
//
// Each instance caches the completed answers it produced or replayed
// (Config.CacheBytes): a completed key never changes until it expires, so a
// replay this instance has seen before touches no database.
package middleware

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

const (
	// StatusClientClosed is what logs and metrics record for a request whose
	// client left before it was answered (nginx's 499); nothing is sent.
	StatusClientClosed = 499
	// ReplayedHeader marks an answer that was replayed, not produced anew.
	ReplayedHeader = "Idempotent-Replayed"
)

// Config configures the middleware.
type Config struct {
	DB    *gorm.DB
	TTL   time.Duration // how long a key is remembered after its operation started
	Lease time.Duration // how long a crashed attempt blocks its retries; a live one's heartbeat extends it
	Wait  time.Duration // how long a duplicate waits for the original before a 409
	// Timeout bounds one attempt (handler, transaction, recording, heartbeat), so that a hung
	// handler lets the key pass to a retry. 4 × Lease when zero.
	Timeout time.Duration
	Now     func() time.Time // the clock of leases and expiry; time.Now when nil
	// Scope names the authenticated principal; keys of different scopes
	// never meet. It must not come from anything the client chooses freely.
	Scope func(*gin.Context) string
	// Refuse sends a refusal of the middleware's own (Refusals), in the
	// application's words; problem+json when nil. The middleware aborts.
	Refuse  func(*gin.Context, Refusal)
	Observe func(route string, outcome Outcome) // told each Outcome, for metrics; optional
	// ExtendHolds moves the end of the holds a run of a two-phase operation took under its name
	// (Operation.Holder) to its lease's new end, at each extension until the transaction
	// begins, once the derived key went out; optional.
	ExtendHolds func(ctx context.Context, holder string, until time.Time) error
	// CacheBytes bounds the replay cache in bytes: DefaultCacheBytes if 0, none if < 0.
	CacheBytes  int64
	PushAnswers bool // on PostgreSQL, with a PushSecret, push answers to other instances
	// PushSecret signs pushes: the same on every instance, MinPushSecret bytes at least, out of the database.
	PushSecret []byte
	// DigestKey keys the request hashes kept in a key's row: MinDigestKey bytes
	// at least, the same on every instance, out of the database. Changing it
	// makes older keys answer their retries 422 until they expire.
	DigestKey  []byte
	FlushEvery time.Duration // how often replay counts are written; defaultFlushEvery when zero
	Logger     *slog.Logger
}

// Outcome is what the middleware did with one request.
type Outcome string

// The outcomes, as metrics count them.
const (
	OutcomeClaimed        Outcome = "claimed"              // a new operation started
	OutcomeTakenOver      Outcome = "taken_over"           // a stalled operation's lease passed; a retry restarted it
	OutcomeRetried        Outcome = "retried"              // a released operation restarted by its retry
	OutcomeReplayed       Outcome = "replayed"             // a completed answer was replayed at once
	OutcomeWaitedReplayed Outcome = "waited_replayed"      // replayed after waiting for the original
	OutcomeMismatch       Outcome = "mismatch"             // the key was used for another request: 422
	OutcomeInProgress     Outcome = "in_progress_conflict" // still running after the wait: 409
	OutcomeStored         Outcome = "stored"               // the answer was committed for replay
	OutcomeReleased       Outcome = "released"             // no answer kept; the key is free again
	OutcomeLeaseLost      Outcome = "lease_lost"           // fenced: another attempt had taken over
	OutcomeSwept          Outcome = "swept"                // an expired key was deleted
)

// Idempotency is the middleware.
type Idempotency struct {
	cfg     Config
	store   store
	answers *answers // nil: no cache
	replays *replayCounter
	push    *pusher // nil: answers are not pushed
	digest  digester
	waits   waitlist
	poll    time.Duration // a waiting duplicate's first pause; it doubles up to 100 ms
	// ticker starts the heartbeat's ticks; tests drive it.
	ticker func(every time.Duration) (<-chan time.Time, func())
}

// New builds the middleware.
func New(cfg Config) *Idempotency {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Timeout = cfg.AttemptTimeout()
	refuse := cfg.Refuse
	if refuse == nil {
		refuse = writeRefusal
	}
	// Every refusal stops the chain: the handler never runs without a claim.
	cfg.Refuse = func(c *gin.Context, r Refusal) {
		c.Abort()
		refuse(c, r)
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Observe == nil {
		cfg.Observe = func(string, Outcome) {}
	}
	if n := len(cfg.PushSecret); n > 0 && n < MinPushSecret {
		panic("middleware: Config.PushSecret must be at least 32 bytes")
	}
	m := &Idempotency{cfg: cfg, store: store{db: cfg.DB}, answers: newAnswers(cfg.CacheBytes, cfg.Now),
		replays: newReplayCounter(cfg.DB, cmp.Or(max(cfg.FlushEvery, 0), defaultFlushEvery)),
		digest:  newDigester(cfg.DigestKey), poll: 5 * time.Millisecond, ticker: newTicker}
	if cfg.PushAnswers {
		m.push = newPusher(cfg.DB, m.answers, cfg.Logger, cfg.PushSecret)
	}
	return m
}

// AttemptTimeout is how long one attempt may run (Timeout, or 4 × Lease), for all that waits on one.
func (cfg Config) AttemptTimeout() time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return 4 * cfg.Lease
}

// AttemptTimeout is Config.AttemptTimeout.
func (m *Idempotency) AttemptTimeout() time.Duration { return m.cfg.Timeout }

// Close stops the background work and flushes replay counts, once requests have stopped.
func (m *Idempotency) Close(ctx context.Context) error {
	m.push.close()
	return m.replays.close(ctx)
}

// Mode is how a route's claim commits: see the package documentation.
type Mode int

const (
	TwoPhase Mode = iota // the claim commits before the handler runs
	Atomic               // the claim commits with the handler's writes
)

// Require, after authentication, makes a route idempotent, two-phase: safe for any handler.
func (m *Idempotency) Require() gin.HandlerFunc {
	return func(c *gin.Context) { m.handle(c, TwoPhase) }
}

// RequireAtomic is Require for a handler that calls nothing outside the
// database: its claim, writes and completion commit as one transaction.
func (m *Idempotency) RequireAtomic() gin.HandlerFunc {
	return func(c *gin.Context) { m.handle(c, Atomic) }
}

func (m *Idempotency) internal(c *gin.Context, what string, err error) {
	m.cfg.Logger.ErrorContext(c.Request.Context(), "idempotency: "+what, "err", err, "route", c.FullPath())
	r := refuseInternal.with("The request could not be processed; retry with the same key.")
	r.Cause = err
	m.cfg.Refuse(c, r)
}
