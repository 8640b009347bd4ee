package middleware

// The outcome of an attempt, in either mode: the handler runs as the owner
// of the key, then what it answered is recorded for replay, or rolled back
// and the key released for a retry.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// attemptContext is the context of one attempt: from the claim on, the
// operation runs to its recorded end even if the client leaves, within
// Timeout; an attempt that outlives it is rolled back and released, on
// detached.
func (m *Idempotency) attemptContext(c *gin.Context) (ctx context.Context, cancel context.CancelFunc, detached context.Context) {
	detached = context.WithoutCancel(c.Request.Context())
	ctx, cancel = context.WithTimeout(detached, m.cfg.Timeout)
	return ctx, cancel, detached
}

func (m *Idempotency) newOperation(ctx context.Context, k IdempotencyKey, raw [sha256.Size]byte) *operation {
	return &operation{key: k, raw: raw, db: m.cfg.DB.WithContext(ctx)}
}

// run executes the handler as the owner of the key, then records the
// outcome and wakes the duplicates waiting here.
func (m *Idempotency) run(c *gin.Context, ctx, detached context.Context, op *operation) {
	c.Request = c.Request.WithContext(ctx)
	c.Set(operationKey, op)
	defer m.waits.wake(scopedKey{op.key.Scope, op.key.Key})
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

// record commits the outcome and only then sends it: a 2xx, 3xx or final
// 4xx is kept for replay with the handler's writes; anything else is
// rolled back and the key released, for a retry.
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
	case !held: // fenced: a retry took the key over, and its answer is the one
		op.rollback()
		m.observe(c.Request.Context(), op.key.Route, OutcomeLeaseLost)
		m.cfg.Refuse(c, refuseLeaseLost.with("Retry with the same key to get the answer of the attempt that finished."))
	default:
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
	}
}

// complete stores the answer with the handler's writes and commits it, then
// caches and pushes it; false when the key was no longer this attempt's.
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

// release rolls the attempt back and releases the key (deletes it, when
// forgettable; an atomic claim goes with the rollback). False when the key
// was no longer this attempt's.
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
// marks the request's span, which it returns, with it (idempotency.claimed…).
func (m *Idempotency) observe(ctx context.Context, route string, outcome Outcome) trace.Span {
	m.cfg.Observe(route, outcome)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("idempotency."+string(outcome), true))
	}
	return span
}

// recorder buffers the handler's whole response: status, headers and body.
// Nothing reaches the client until the middleware has committed the outcome,
// so a client never sees an answer the server could forget.
type recorder struct {
	gin.ResponseWriter // the real writer, for what is not buffered
	header             http.Header
	status             int
	body               bytes.Buffer
	written            bool
}

func newRecorder(w gin.ResponseWriter) *recorder {
	return &recorder{ResponseWriter: w, header: http.Header{}, status: http.StatusOK}
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if code > 0 && !r.written {
		r.status = code
	}
}

func (r *recorder) WriteHeaderNow() { r.written = true }

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.body.Write(b)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.written = true
	return r.body.WriteString(s)
}

func (r *recorder) Status() int { return r.status }

func (r *recorder) Size() int {
	if !r.written {
		return -1
	}
	return r.body.Len()
}

func (r *recorder) Written() bool { return r.written }

// Flush does nothing: the response is sent whole after the commit.
func (r *recorder) Flush() {}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("idempotent responses are buffered and cannot be hijacked")
}

func (r *recorder) Pusher() http.Pusher { return nil }

// replayedHeaders are the only headers stored for replay (never
// Set-Cookie). Cache-Control is part of the answer: a problem's no-store
// must hold for its replay too.
var replayedHeaders = []string{"Content-Type", "Location", "ETag", "Link", "Cache-Control"}

// replayable is what of header a replay may send, named as
// replayedHeaders spells them: what is stored, or pushed.
func replayable(header http.Header) http.Header {
	h := http.Header{}
	for _, name := range replayedHeaders {
		v := header[name] // as stored ("ETag")
		if len(v) == 0 {
			v = header.Values(name) // as a handler sets it ("Etag")
		}
		if len(v) > 0 {
			h[name] = v
		}
	}
	return h
}

func (r *recorder) stored() storedResponse {
	return storedResponse{Status: r.status, Headers: replayable(r.header), Body: r.body.Bytes()}
}

// send writes a response to the real writer.
func send(w gin.ResponseWriter, header http.Header, mark string, status int, body []byte) {
	dst := w.Header()
	for name, values := range header {
		dst[name] = slices.Clip(values) // an append by whoever comes next copies, never writes into a cached answer
	}
	if mark != "" {
		dst[mark] = replayedValue // header is a cached answer's: never set on it
	}
	dst.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.WriteHeaderNow()
	_, _ = w.Write(body)
}

// replayedValue is the value of ReplayedHeader; shared, never modified.
var replayedValue = []string{"true"}
