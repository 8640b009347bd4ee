// Package middleware holds the idempotency middleware: one Gin handler that
// makes a retried, double-clicked or redelivered write happen once and
// answers every repeat with the original response. It knows nothing about
// orders or payments; handlers write through the transaction it hands them.
package middleware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/problem"
)

// MaxBodyBytes bounds the body of an idempotent request.
const MaxBodyBytes = 1 << 20

// StatusClientClosed is what logs and metrics record for a request whose
// client left before it was answered (nginx's 499); nothing is sent.
const StatusClientClosed = 499

// ReplayedHeader marks an answer that was replayed, not produced anew.
const ReplayedHeader = "Idempotent-Replayed"

// Config configures the middleware.
type Config struct {
	DB *gorm.DB
	// TTL is how long a key is remembered after its operation started.
	TTL time.Duration
	// Lease is how long an attempt owns a key before a retry may take over
	// when nothing extends it: how long a crashed attempt blocks its retries.
	// A live attempt's heartbeat extends it, up to Timeout.
	Lease time.Duration
	// Wait is how long a duplicate waits for the original before a 409.
	Wait time.Duration
	// Timeout bounds one attempt, and so how long a request may take: its
	// handler's context, its transaction and the recording of its outcome
	// end then, and the heartbeat stops extending the lease, so a hung
	// handler lets the key pass to a retry instead of holding it for ever.
	// An attempt that outlives it is rolled back and its key released. 4 ×
	// Lease when zero.
	Timeout time.Duration
	// Now is the clock of leases and expiry; time.Now when nil.
	Now func() time.Time
	// Scope names the authenticated principal; keys of different scopes
	// never meet. It must not come from anything the client chooses freely.
	Scope func(*gin.Context) string
	// Render sends a problem; problem.Write when nil. It need not abort the
	// chain: the middleware does.
	Render func(*gin.Context, *problem.Problem)
	// Observe is told what the middleware did for a route (the Outcome
	// constants), for metrics; optional.
	Observe func(route string, outcome Outcome)
	// FlushEvery is how often replay counts are written to the key rows;
	// DefaultFlushEvery when zero.
	FlushEvery time.Duration
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
	replays *replayCounter
	waits   waitlist
	// poll is the first pause of a duplicate waiting for its original; it
	// doubles up to 100 ms.
	poll time.Duration
	// ticker starts the heartbeat's ticker: its ticks and its stop.
	// newTicker; tests drive the heartbeat with their own.
	ticker func(every time.Duration) (<-chan time.Time, func())
}

// New builds the middleware.
func New(cfg Config) *Idempotency {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 4 * cfg.Lease
	}
	render := cfg.Render
	if render == nil {
		render = problem.Write
	}
	// Every refusal stops the chain here, whatever the renderer does: the
	// business handler must never run without a claim.
	cfg.Render = func(c *gin.Context, p *problem.Problem) {
		c.Abort()
		render(c, p)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string, Outcome) {}
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	return &Idempotency{cfg: cfg, store: store{db: cfg.DB}, replays: newReplayCounter(cfg.DB, cfg.FlushEvery), poll: 5 * time.Millisecond, ticker: newTicker}
}

// Flush writes the replay counts counted so far to the key rows.
func (m *Idempotency) Flush(ctx context.Context) error { return m.replays.flush(ctx) }

// Close stops the background work of the middleware and flushes the replay
// counts; call it once requests have stopped.
func (m *Idempotency) Close(ctx context.Context) error { return m.replays.close(ctx) }

// Require is the handler to put in front of each route that must be
// idempotent, after authentication.
func (m *Idempotency) Require() gin.HandlerFunc { return m.handle }

const operationKey = "idempotency.operation"

// operation is the claimed key as the handler sees it.
type operation struct {
	scope, key, owner, id string
	route                 string
	db                    *gorm.DB // bound to a context a client disconnect cannot cancel
	tx                    *gorm.DB
	final                 bool
	// stopHeartbeat stops the lease's heartbeat; the transaction's first
	// use calls it (see Tx), as does the end of the handler.
	stopHeartbeat func()
	mu            sync.Mutex
	onExtend      []func(ctx context.Context, until time.Time) error
}

func (m *Idempotency) handle(c *gin.Context) {
	scope := m.cfg.Scope(c)
	if scope == "" {
		m.cfg.Render(c, problem.Unauthorized.With("Sign in first: idempotency keys belong to a user."))
		return
	}
	headerKey, err := ParseKeyHeader(c.Request.Header.Values("Idempotency-Key"))
	if err != nil && !errors.Is(err, errKeyMissing) {
		m.cfg.Render(c, problem.KeyInvalid.With(err.Error()))
		return
	}
	// A form may carry its key in the body; anything else must have the
	// header, and is refused before its body is read.
	isForm := mediaType(c.Request.Header.Get("Content-Type")) == formType
	if headerKey == "" && !isForm {
		m.cfg.Render(c, problem.KeyMissing.With(errKeyMissing.Error()))
		return
	}
	body, err := readBody(c)
	switch {
	case errors.Is(err, errBodyTooLarge):
		m.cfg.Render(c, problem.TooLarge.With(err.Error()))
		return
	case err != nil:
		m.cfg.Render(c, problem.MalformedRequest.With(err.Error()))
		return
	}
	key, err := resolveKey(headerKey, isForm, body)
	switch {
	case errors.Is(err, errKeyMissing):
		m.cfg.Render(c, problem.KeyMissing.With(err.Error()))
		return
	case err != nil:
		m.cfg.Render(c, problem.KeyInvalid.With(err.Error()))
		return
	}
	c.Set(keyContextKey, key)
	req := Request{
		Method: c.Request.Method, Route: c.FullPath(), Params: c.Params,
		Query: c.Request.URL.Query(), ContentType: c.Request.Header.Get("Content-Type"), Body: body,
	}
	fingerprint, err := Fingerprint(req)
	if err != nil {
		m.cfg.Render(c, problem.MalformedRequest.With(err.Error()))
		return
	}
	m.execute(c, IdempotencyKey{Scope: scope, Key: key, Method: c.Request.Method, Route: c.FullPath(), Fingerprint: fingerprint, Target: Target(req)})
}

var errBodyTooLarge = fmt.Errorf("the body is larger than %d bytes", MaxBodyBytes)

// readBody reads the whole body, at most MaxBodyBytes, and puts it back for
// the handler.
func readBody(c *gin.Context) ([]byte, error) {
	if c.Request.ContentLength > MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("the body could not be read: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// resolveKey takes the key from the header or, for a form post, from the
// hidden form field; both present must agree.
func resolveKey(headerKey string, isForm bool, body []byte) (string, error) {
	if isForm {
		if form, err := url.ParseQuery(string(body)); err == nil && form.Has(FormKeyField) {
			if len(form[FormKeyField]) > 1 {
				return "", errKeyList
			}
			fieldKey, err := checkKey(form.Get(FormKeyField))
			if err != nil {
				return "", err
			}
			if headerKey != "" && headerKey != fieldKey {
				return "", errKeyTwice
			}
			return fieldKey, nil
		}
	}
	if headerKey == "" {
		return "", errKeyMissing
	}
	return headerKey, nil
}

// execute finds out what the key says and acts on it: run the operation if
// this request claims it, replay the answer if it is done, wait if it is
// running, refuse if the key names another request.
func (m *Idempotency) execute(c *gin.Context, want IdempotencyKey) {
	ctx := c.Request.Context()
	waitUntil := time.Now().Add(m.cfg.Wait)
	delay := m.poll
	for waited := false; ; waited = true {
		found, ok, err := m.store.find(ctx, want.Scope, want.Key)
		if err != nil && ctx.Err() != nil {
			c.AbortWithStatus(StatusClientClosed) // the client left before anything was claimed
			return
		}
		if err != nil {
			m.internal(c, "find key", err)
			return
		}
		now := m.now()
		switch {
		case !ok || found.claimable(now):
			want.OperationID, want.OwnerToken = uuid.NewString(), uuid.NewString()
			want.State, want.CreatedAt = StateInProgress, now
			want.LockedUntil, want.ExpiresAt = now.Add(m.cfg.Lease), now.Add(m.cfg.TTL)
			// Detached: a client gone mid-statement must not leave a claim
			// committed behind an error, or an error for a claim it made.
			claimed, err := m.store.claim(context.WithoutCancel(ctx), want)
			if err != nil {
				m.internal(c, "claim key", err)
				return
			}
			if claimed {
				m.cfg.Observe(want.Route, OutcomeClaimed)
				m.run(c, want)
				return
			}
		case found.Fingerprint != want.Fingerprint && !(found.Lapsed(now) && found.Target == want.Target):
			// A released key takes a corrected body, but only for the same
			// target: its operation, and the derived key, stay with it. A
			// lapsed lease counts as released: its release may have failed.
			m.cfg.Observe(want.Route, OutcomeMismatch)
			m.cfg.Render(c, problem.KeyReused.With(fmt.Sprintf("The key was first used for %s %s with another body or query.", found.Method, found.Route)))
			return
		case found.State == StateCompleted:
			m.replay(c, found, waited)
			return
		case !found.LockedUntil.After(now):
			want.OperationID, want.OwnerToken, want.LockedUntil = found.OperationID, uuid.NewString(), now.Add(m.cfg.Lease)
			took, err := m.store.takeover(context.WithoutCancel(ctx), want, found.OwnerToken, now)
			if err != nil {
				m.internal(c, "take over key", err)
				return
			}
			if took {
				outcome := OutcomeTakenOver
				if found.Released() {
					outcome = OutcomeRetried
				}
				m.cfg.Observe(want.Route, outcome)
				m.run(c, want)
				return
			}
		}
		if !time.Now().Before(waitUntil) {
			m.cfg.Observe(want.Route, OutcomeInProgress)
			p := problem.KeyInProgress.With("The original request is still running; retry with the same key to get its answer.")
			p.RetryAfter = 1
			m.cfg.Render(c, p)
			return
		}
		if !m.sleep(ctx, scopedKey{want.Scope, want.Key}, min(delay, time.Until(waitUntil))) {
			c.AbortWithStatus(StatusClientClosed) // the client left; nobody is waiting for an answer
			return
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
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

// claimable: the key expired and nobody holds it, so it may name a new
// operation. It mirrors the condition of store.claim.
func (k IdempotencyKey) claimable(now time.Time) bool {
	return !k.ExpiresAt.After(now) && (k.State == StateCompleted || !k.LockedUntil.After(now))
}

// run executes the handler as the owner of the key, then records the outcome.
func (m *Idempotency) run(c *gin.Context, k IdempotencyKey) {
	// From here the operation runs to its recorded end even if the client
	// disconnects: a charge must not be left half-recorded. The handler, its
	// transaction and the recording of its outcome share Timeout (the
	// transaction is begun on ctx, and database/sql rolls it back when ctx
	// ends): an attempt that outlives it is not recorded late but rolled back
	// and released, which runs on detached, without a limit.
	detached := context.WithoutCancel(c.Request.Context())
	ctx, cancel := context.WithTimeout(detached, m.cfg.Timeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	op := &operation{scope: k.Scope, key: k.Key, owner: k.OwnerToken, id: k.OperationID, route: k.Route, db: m.cfg.DB.WithContext(ctx)}
	c.Set(operationKey, op)
	// Once the outcome is recorded or released, duplicates waiting here look
	// again at once.
	defer m.waits.wake(scopedKey{k.Scope, k.Key})
	real := c.Writer
	rec := newRecorder(real)
	c.Writer = rec
	op.stopHeartbeat = m.heartbeat(ctx, op)
	defer func() {
		op.stopHeartbeat()
		c.Writer = real
		if p := recover(); p != nil {
			m.abandon(detached, op)
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
				m.cfg.Logger.Warn("idempotency: the handler outlived its timeout; its lease is no longer extended", "route", op.route)
				return
			case <-ticks:
			}
			held, err := m.store.extend(ctx, op.scope, op.key, op.owner, m.now().Add(m.cfg.Lease))
			switch {
			case err != nil:
				m.cfg.Logger.Error("extend idempotency lease", "err", err, "route", op.route)
			case !held:
				m.cfg.Logger.Warn("idempotency lease lost while the handler ran", "route", op.route)
				return
			default:
				op.mu.Lock()
				onExtend := slices.Clone(op.onExtend)
				op.mu.Unlock()
				for _, fn := range onExtend {
					if err := fn(ctx, m.now().Add(m.cfg.Lease)); err != nil {
						m.cfg.Logger.Error("extend a hold with the idempotency lease", "err", err, "route", op.route)
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
// the key released, so that a corrected or later retry runs again.
func (m *Idempotency) record(c *gin.Context, ctx context.Context, op *operation, rec *recorder) {
	resp := rec.stored()
	if !(resp.Status < 400 || resp.Status < 500 && op.final) {
		if !m.abandon(ctx, op) {
			// Fenced: the key is another attempt's now, so this answer is
			// not the operation's, whatever the handler said.
			m.leaseLost(c, op)
			return
		}
		send(c.Writer, rec.header, rec.status, rec.body.Bytes())
		return
	}
	db := op.tx
	if db == nil {
		db = op.db
	}
	completed, err := m.store.complete(db, op.scope, op.key, op.owner, resp)
	if err == nil && completed && op.tx != nil {
		err = op.tx.Commit().Error
	}
	switch {
	case err != nil:
		m.abandon(ctx, op)
		m.internal(c, "record outcome", err)
	case !completed:
		// Fenced: the lease passed and a retry took the key over. This
		// attempt's writes are rolled back; the retry's answer stands.
		op.rollback()
		m.leaseLost(c, op)
	default:
		m.cfg.Observe(op.route, OutcomeStored)
		send(c.Writer, rec.header, rec.status, rec.body.Bytes())
	}
}

// releaseTries is how many times abandon tries to release a key before it
// leaves the key to its lease: a key whose lease lapsed is free (Lapsed).
const releaseTries = 3

// abandon rolls the attempt back and releases the key. It reports false
// when the key was no longer this attempt's to release.
func (m *Idempotency) abandon(ctx context.Context, op *operation) bool {
	op.rollback()
	var held bool
	var err error
	for try := 1; try <= releaseTries; try++ {
		if held, err = m.store.release(ctx, op.scope, op.key, op.owner, m.now()); err == nil {
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
		m.cfg.Observe(op.route, OutcomeReleased)
	}
	return held
}

// leaseLost answers an attempt that was taken over: its client should ask
// again and get the answer of the attempt that owns the key.
func (m *Idempotency) leaseLost(c *gin.Context, op *operation) {
	m.cfg.Observe(op.route, OutcomeLeaseLost)
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
func (m *Idempotency) replay(c *gin.Context, k IdempotencyKey, waited bool) {
	resp, err := k.response()
	if err != nil {
		m.internal(c, "decode stored response", err)
		return
	}
	// Counted in memory before the answer goes out, so that what a client
	// has seen is already in the count Keys reports; the row is updated
	// later, in a batch, so a replay stays one read and no write.
	m.replays.add(k)
	outcome := OutcomeReplayed
	if waited {
		outcome = OutcomeWaitedReplayed
	}
	m.cfg.Observe(c.FullPath(), outcome)
	resp.Headers.Set(ReplayedHeader, "true")
	send(c.Writer, resp.Headers, resp.Status, resp.Body)
	c.Abort()
}

func (m *Idempotency) internal(c *gin.Context, what string, err error) {
	m.cfg.Logger.Error("idempotency: "+what, "err", err, "route", c.FullPath())
	m.cfg.Render(c, problem.Internal.With("The request could not be processed; retry with the same key."))
}

// DefaultSweepBatch is how many keys one statement of Sweep deletes when
// it is given no positive batch size.
const DefaultSweepBatch = 500

// Sweep deletes expired keys in batches until none is left, and reports how
// many it deleted. Each batch is its own short statement, so claims are not
// held up behind one long delete.
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

// Keys lists the most recent keys of a scope, newest first, with the
// replays this instance counted and has not written yet.
func (m *Idempotency) Keys(ctx context.Context, scope string, limit int) ([]IdempotencyKey, error) {
	return m.replays.withPending(func() ([]IdempotencyKey, error) {
		keys := []IdempotencyKey{}
		err := m.cfg.DB.WithContext(ctx).Omit("body", "headers").Where("scope = ?", scope).
			Order("created_at DESC, id DESC").Limit(limit).Find(&keys).Error
		return keys, err
	})
}

func current(c *gin.Context) *operation {
	op, ok := c.Get(operationKey)
	if !ok {
		panic("middleware: the route is not behind the idempotency middleware")
	}
	return op.(*operation)
}

// Tx is the transaction of the current operation, begun on first use. The
// handler's business writes go through it; the middleware commits it
// together with the key's completion, or rolls it back.
func Tx(c *gin.Context) *gorm.DB {
	op := current(c)
	if op.tx == nil {
		op.stopHeartbeat()
		op.tx = op.db.Begin()
	}
	return op.tx
}

// OnLeaseExtended has fn run each time the heartbeat extends the
// operation's lease, with the lease's new end, until the handler's
// transaction begins: for a hold of the handler's own that must last as
// long as the operation does (a payment's hold on its order), so that it
// does not run out under a slow but live attempt.
func OnLeaseExtended(c *gin.Context, fn func(ctx context.Context, until time.Time) error) {
	op := current(c)
	op.mu.Lock()
	defer op.mu.Unlock()
	op.onExtend = append(op.onExtend, fn)
}

// DerivedKey is the key to pass downstream (the payment provider) and to
// store on business rows: the same for every attempt of one operation, and
// different for a new operation under an expired key.
func DerivedKey(c *gin.Context) string {
	op := current(c)
	return deriveKey(op.scope, op.key, op.id)
}

// DerivedKey is the key the operation this row names passed downstream: the
// business rows it wrote carry it.
func (k IdempotencyKey) DerivedKey() string { return deriveKey(k.Scope, k.Key, k.OperationID) }

func deriveKey(scope, key, operationID string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key + "\x00" + operationID))
	return "idem_" + hex.EncodeToString(sum[:20])
}

// Final declares the handler's 4xx answer final: execution began and the
// same request would always get it (a declined card, an order already
// paid), so it is stored and replayed rather than released.
func Final(c *gin.Context) { current(c).final = true }
