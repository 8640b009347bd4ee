// Package httpkit is the shop's HTTP plumbing that knows no operation of
// the shop: request ids, the access log, metrics, CORS, security headers,
// trusted proxies, health checks and the API's reference pages.
package httpkit

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
)

// RequestIDHeader carries the request's id on every answer: what a client
// quotes to support, and what joins the log lines of one request.
const RequestIDHeader = "X-Request-Id"

const maxRequestID = 64 // bytes of a client's own id

type requestIDKey struct{}

// RequestID names the request, in its context and answer's header: the
// client's id when a token, else a new uuid. Set on the real writer, which
// the idempotency middleware never stores: a replay carries its own id.
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
	return id != "" && len(id) <= maxRequestID &&
		!strings.ContainsFunc(id, func(r rune) bool { return r < '!' || r > '~' })
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

// TrustProxies makes c.ClientIP() the peer or, when the peer is one of
// proxies, the rightmost X-Forwarded-For address that is not (left of it the
// client writes what it likes). X-Real-IP is never read: a proxy that does
// not set it passes on the client's.
func TrustProxies(r *gin.Engine, proxies []netip.Prefix) {
	r.ForwardedByClientIP = true
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	var cidrs []string
	for _, p := range proxies {
		cidrs = append(cidrs, p.String())
	}
	if err := r.SetTrustedProxies(cidrs); err != nil {
		panic(err) // a netip.Prefix always reads as a CIDR
	}
}

// What the log keeps of the client's method and path, in bytes.
const maxLoggedMethod, maxLoggedPath = 16, 256

// clip cuts s to at most n bytes, at a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// AccessLog writes one line per answered request, naming the user user
// finds and the idempotency key only by a short hash. Headers, bodies and
// the query may hold passwords, tokens or the key: they are never logged.
func AccessLog(logger *slog.Logger, user func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		level := slog.LevelInfo
		if c.Writer.Status() >= http.StatusInternalServerError {
			level = slog.LevelError
		}
		if !logger.Enabled(c.Request.Context(), level) {
			return
		}
		attrs := append(make([]slog.Attr, 0, 9),
			slog.String("method", clip(c.Request.Method, maxLoggedMethod)),
			slog.String("route", Route(c)),
			slog.String("path", clip(c.Request.URL.Path, maxLoggedPath)),
			slog.Int("status", c.Writer.Status()),
			slog.Duration("duration", time.Since(start)),
			slog.String("client_ip", c.ClientIP()))
		if id := user(c); id != "" {
			attrs = append(attrs, slog.String("user_id", id))
		}
		if key := middleware.RedactedKey(c); key != "" {
			attrs = append(attrs, slog.String("idempotency_key", key), slog.Bool("replayed", middleware.Replayed(c)))
		}
		logger.LogAttrs(c.Request.Context(), level, "request", attrs...)
	}
}
