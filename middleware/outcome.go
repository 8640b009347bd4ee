package middleware

// The outcome of an attempt, in either mode: the handler runs as the owner
// of the key, then what it answered is recorded for replay, or rolled back
// and the key released for a retry.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

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

func (m *Idempotency) newOperation(ctx context.Context, k IdempotencyKey, raw [sha256.Size]byte) *operation {
	return &operation{key: k, raw: raw, db: m.cfg.DB.WithContext(ctx)}
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

// record commits the outcome and only then sends it. Outcomes where
// execution began (2xx, 3xx, and 4xx the handler declared final) are kept
// for replay, in the handler's transaction; anything else is rolled back and
// the key released, so that a corrected or later retry runs again. A kept
// answer is cached for this instance's replays once it is committed.
func (m *Idempotency) record(c *gin.Context, ctx context.Context, op *operation, rec *recorder) {
	resp := rec.stored()
	if !(resp.Status < 400 || resp.Status < 500 && op.final) {
		op.notFound = resp.Status == http.StatusNotFound
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
		m.observe(ctx, op.key.Route, OutcomeStored)
		k := op.key
		a := &cached{
			replayOf: replayOfKey(k), method: k.Method, route: k.Route, fingerprint: k.Fingerprint, raw: op.raw, expiresAt: k.ExpiresAt,
			status: resp.Status, headers: resp.Headers, body: bytes.Clone(resp.Body), // no spare capacity kept
		}
		m.answers.put(op.scoped(), a)
		m.push.publish(op.scoped(), a) // committed: the other instances may keep it
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
	}
}

// releaseTries is how many times release tries to release a key before it
// leaves the key to its lease: a key whose lease lapsed is free (Lapsed).
const releaseTries = 3

// release rolls the attempt back and releases the key: the released state.
// A new operation whose derived key never left the middleware, or that
// answered 404 (a handler answers it before doing anything: see the
// package documentation), is forgotten instead, its row deleted: nothing
// outside names it, so a retry loses nothing by starting afresh, and a
// refused request (a payment to an order that does not exist) leaves no
// row behind. It reports false when the key was no longer this attempt's
// to release.
// An atomic operation's claim is in its transaction, so the rollback alone
// releases the key: it is as if it had never been claimed.
func (m *Idempotency) release(ctx context.Context, op *operation) bool {
	op.rollback()
	if op.atomic {
		m.observe(ctx, op.key.Route, OutcomeReleased)
		return true
	}
	var held bool
	var err error
	for try := 1; try <= releaseTries; try++ {
		if held, err = m.store.release(ctx, op.key.Scope, op.key.Key, op.key.OwnerToken, m.now(), op.forgettable()); err == nil {
			break
		}
		m.cfg.Logger.ErrorContext(ctx, "release idempotency key", "err", err, "try", try)
		if try < releaseTries {
			time.Sleep(time.Duration(try) * 50 * time.Millisecond)
		}
	}
	if err != nil {
		held = true // unknown: the handler's answer is the best there is
	}
	if held {
		m.observe(ctx, op.key.Route, OutcomeReleased)
	}
	return held
}

// leaseLost answers an attempt that was taken over: its client should ask
// again and get the answer of the attempt that owns the key.
func (m *Idempotency) leaseLost(c *gin.Context, op *operation) {
	m.observe(c.Request.Context(), op.key.Route, OutcomeLeaseLost)
	m.cfg.Refuse(c, refuseLeaseLost.with("Retry with the same key to get the answer of the attempt that finished."))
}

// observe tells Config.Observe what the middleware did for a request, and
// marks the request's span with it (idempotency.claimed, …, true), which
// it returns: a span shows each step of its request, claimed then stored,
// say. Untraced, the span is a no-op, and nothing is allocated for it.
func (m *Idempotency) observe(ctx context.Context, route string, outcome Outcome) trace.Span {
	m.cfg.Observe(route, outcome)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("idempotency."+string(outcome), true))
	}
	return span
}

func (op *operation) rollback() {
	if op.tx != nil {
		op.tx.Rollback()
		op.tx = nil
	}
}
