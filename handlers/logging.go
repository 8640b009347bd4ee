package handlers

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
)

// logRequest writes one line per request once it is answered. It names the
// idempotency key only by a short hash, and never logs headers, bodies or
// the query: they may hold passwords, tokens or the key itself.
func (s *Server) logRequest(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	level := slog.LevelInfo
	if status >= http.StatusInternalServerError {
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("method", c.Request.Method),
		slog.String("route", route),
		slog.String("path", c.Request.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(start)),
	}
	if user := currentUser(c).ID; user != "" {
		attrs = append(attrs, slog.String("user_id", user))
	}
	if key := middleware.RedactedKey(c); key != "" {
		attrs = append(attrs, slog.String("idempotency_key", key), slog.Bool("replayed", middleware.Replayed(c)))
	}
	s.deps.Logger.LogAttrs(c.Request.Context(), level, "request", attrs...)
}
