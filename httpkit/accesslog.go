package httpkit

import (
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
)

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
		attrs := []slog.Attr{
			slog.String("method", clip(c.Request.Method, maxLoggedMethod)),
			slog.String("route", Route(c)),
			slog.String("path", clip(c.Request.URL.Path, maxLoggedPath)),
			slog.Int("status", c.Writer.Status()),
			slog.Duration("duration", time.Since(start)),
			slog.String("client_ip", c.ClientIP()),
		}
		if id := user(c); id != "" {
			attrs = append(attrs, slog.String("user_id", id))
		}
		if key := middleware.RedactedKey(c); key != "" {
			attrs = append(attrs, slog.String("idempotency_key", key), slog.Bool("replayed", middleware.Replayed(c)))
		}
		logger.LogAttrs(c.Request.Context(), level, "request", attrs...)
	}
}
