// Package httpkit is the shop's HTTP plumbing that knows no operation of
// the shop: request ids, the access log, metrics, CORS, security headers,
// trusted proxies, health checks and the API's reference pages.
package httpkit

import (
	"context"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// RequestIDHeader carries the request's id on every answer: what a client
// quotes to support, and what joins the log lines of one request.
const RequestIDHeader = "X-Request-Id"

const maxRequestID = 64 // bytes of a client's own id

type requestIDKey struct{}

// RequestID names the request, in its context and its answer's header:
// the client's own id when it is a token, else a new uuid. The header is
// set on the real writer, which the idempotency middleware never stores:
// a replay carries the id of the request it answers.
func RequestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !isToken(id) {
		id = uuid.NewString()
	}
	c.Header(RequestIDHeader, id)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestIDKey{}, id))
}

// isToken: 1 to maxRequestID bytes of visible ASCII, '!' to '~', so that
// no space or control character of a client's gets into a header or a log.
func isToken(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := range len(id) {
		if id[i] < '!' || id[i] > '~' {
			return false
		}
	}
	return true
}

// RequestIDOf is the id RequestID gave the request of ctx.
func RequestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestIDs makes every record logged with a request's context carry its
// request_id; wrapping twice adds it once.
func RequestIDs(h slog.Handler) slog.Handler {
	if _, ok := h.(requestIDs); ok {
		return h
	}
	return requestIDs{h}
}

type requestIDs struct{ slog.Handler }

func (h requestIDs) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestIDOf(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDs{h.Handler.WithAttrs(attrs)}
}

func (h requestIDs) WithGroup(name string) slog.Handler {
	return requestIDs{h.Handler.WithGroup(name)}
}
