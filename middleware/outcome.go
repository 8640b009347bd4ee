package middleware

// The outcome of an attempt, in either mode: the handler runs as the owner
// of the key, then what it answered is recorded for replay, or rolled back
// and the key released for a retry.

import (
	"bytes"
	"cmp"
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
// the recording of its outcome share Timeout (database/sql rolls the
// transaction back when ctx ends): an attempt that outlives it is not
// recorded late but rolled back and released, on detached.
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
// for replay, with the handler's writes; anything else is rolled back and
// the key released, so that a corrected or later retry runs again.
func (m *Idempotency) record(c *gin.Context, ctx context.Context, op *operation, rec *recorder) {
	resp := rec.stored()
	var held bool
	var err error
	if resp.Status < 400 || resp.Status < 500 && op.final {
		held, err = m.complete(ctx, op, resp)
	} else {
		op.notFound = resp.Status == http.StatusNotFound
		held = m.release(ctx, op)
	}
	switch {
	case err != nil:
		m.release(ctx, op)
		m.internal(c, "record outcome", err)
	case !held:
		// Fenced: the lease passed and a retry took the key over. This
		// attempt's writes are rolled back; whatever the handler said, the
		// answer is the retry's.
		op.rollback()
		m.observe(c.Request.Context(), op.key.Route, OutcomeLeaseLost)
		m.cfg.Refuse(c, refuseLeaseLost.with("Retry with the same key to get the answer of the attempt that finished."))
	default:
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
	}
}

// complete stores the answer, in the handler's transaction when there is
// one, and commits it; once committed, the answer is cached here and
// pushed to the other instances. False when the key was no longer this
// attempt's.
func (m *Idempotency) complete(ctx context.Context, op *operation, resp storedResponse) (bool, error) {
	completed, err := m.store.on(cmp.Or(op.tx, op.db)).complete(op.key, resp)
	if err == nil && completed && op.tx != nil {
		err = op.tx.Commit().Error
		op.tx = nil
	}
	if err != nil || !completed {
		return completed, err
	}
	m.observe(ctx, op.key.Route, OutcomeStored)
	a := answerOf(op.key, op.raw, resp.Status, resp.Headers, bytes.Clone(resp.Body)) // no spare capacity kept
	m.answers.put(a)
	m.push.publish(a)
	return true, nil
}

// releaseTries is how many times release tries before it leaves the key to
// its lease: a key whose lease lapsed is free (Lapsed).
const releaseTries = 3

// release rolls the attempt back and releases the key: the released state,
// or, when the operation is forgettable (see operation.forgettable), no
// row at all. An atomic operation's claim is in its transaction, so the
// rollback alone releases it. False when the key was no longer this
// attempt's to release.
func (m *Idempotency) release(ctx context.Context, op *operation) bool {
	op.rollback()
	if op.atomic {
		m.observe(ctx, op.key.Route, OutcomeReleased)
		return true
	}
	var held bool
	var err error
	for try := 1; try <= releaseTries; try++ {
		if held, err = m.store.release(ctx, op.key, m.now(), op.forgettable()); err == nil {
			break
		}
		m.cfg.Logger.ErrorContext(ctx, "release idempotency key", "err", err, "try", try)
		if try < releaseTries {
			time.Sleep(time.Duration(try) * 50 * time.Millisecond)
		}
	}
	if held || err != nil { // unknown: the handler's answer is the best there is
		m.observe(ctx, op.key.Route, OutcomeReleased)
	}
	return held || err != nil
}

// observe tells Config.Observe what the middleware did for a request, and
// marks the request's span with it (idempotency.claimed, …, true), which
// it returns. Untraced, the span is a no-op, and nothing is allocated.
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
