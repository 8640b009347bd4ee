package middleware

// The outcome of an attempt: recorded for replay with its writes, or rolled back and released.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
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

// attemptContext: from the claim on, the operation runs to its recorded end within Timeout even
// if the client leaves; past it, it is released on detached.
func (m *Idempotency) attemptContext(c *gin.Context) (ctx context.Context, cancel context.CancelFunc, detached context.Context) {
	detached = context.WithoutCancel(c.Request.Context())
	ctx, cancel = context.WithTimeout(detached, m.cfg.Timeout)
	return ctx, cancel, detached
}

// run executes the handler as the key's owner, records the outcome and wakes the duplicates.
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

// record commits the outcome, then sends it: a 2xx, 3xx or final 4xx is kept; anything else released.
func (m *Idempotency) record(c *gin.Context, ctx context.Context, op *operation, rec *recorder) {
	resp := storedResponse{Status: rec.status, Headers: replayable(rec.header), Body: rec.body.Bytes()}
	held, err := false, error(nil)
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

// complete commits the answer with the handler's writes, then caches and pushes it; false if fenced.
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

// releaseTries: then release leaves the key to its lease (a lapsed key is free).
const releaseTries = 3

// release rolls back and frees the key (deleted when forgettable); false if fenced.
func (m *Idempotency) release(ctx context.Context, op *operation) bool {
	op.rollback()
	if op.atomic {
		m.observe(ctx, op.key.Route, OutcomeReleased)
		return true
	}
	held, err := false, error(nil)
	for try := 1; try <= releaseTries; try++ {
		if held, err = m.store.release(ctx, op.key, m.now(), op.forgettable()); err == nil {
			break
		}
		m.cfg.Logger.ErrorContext(ctx, "release idempotency key", "err", err, "try", try)
		if try < releaseTries {
			time.Sleep(time.Duration(try) * 50 * time.Millisecond)
		}
	}
	held = held || err != nil // unknown: the handler's answer is the best there is
	if held {
		m.observe(ctx, op.key.Route, OutcomeReleased)
	}
	return held
}

// observe tells Config.Observe, and marks and returns the request's span (idempotency.claimed…).
func (m *Idempotency) observe(ctx context.Context, route string, outcome Outcome) trace.Span {
	m.cfg.Observe(route, outcome)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("idempotency."+string(outcome), true))
	}
	return span
}

// recorder buffers the handler's response: nothing is sent before the commit.
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
func (r *recorder) WriteHeaderNow()     { r.written = true }
func (r *recorder) Status() int         { return r.status }
func (r *recorder) Written() bool       { return r.written }
func (r *recorder) Flush()              {} // the response is sent whole after the commit
func (r *recorder) Pusher() http.Pusher { return nil }

func (r *recorder) WriteHeader(code int) {
	if code > 0 && !r.written {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.body.Write(b)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.written = true
	return r.body.WriteString(s)
}

func (r *recorder) Size() int {
	if !r.written {
		return -1
	}
	return r.body.Len()
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("idempotent responses are buffered and cannot be hijacked")
}

// replayedHeaders alone are stored for replay (never Set-Cookie); a problem's no-store holds too.
var replayedHeaders = []string{"Content-Type", "Location", "ETag", "Link", "Cache-Control"}

// replayable is what of header a replay may send, as replayedHeaders spells it.
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

// send writes a response to the real writer; mark names the replay header.
func send(w gin.ResponseWriter, header http.Header, mark string, status int, body []byte) {
	dst := w.Header()
	for name, values := range header {
		dst[name] = slices.Clip(values) // an append by whoever comes next copies, never writes into a cached answer
	}
	if mark != "" {
		dst[mark] = replayedValue // not set on header: it is a cached answer's
	}
	if len(body) > frameItself {
		dst.Set("Content-Length", strconv.Itoa(len(body)))
	} else {
		delete(dst, "Content-Length") // one a handler set is net/http's to compute
	}
	w.WriteHeader(status)
	w.WriteHeaderNow()
	_, _ = w.Write(body)
}

var replayedValue = []string{"true"}

// frameItself is net/http's bufferBeforeChunkingSize. A body that fits is
// given its Content-Length by net/http once the handler returns, the
// original answer and its replays alike (one header fewer to copy); a
// longer one is given it here, not chunked.
const frameItself = 2048
