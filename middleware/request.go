package middleware

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/gin-gonic/gin"
)

// keyContextKey holds the request's idempotency key once it is read.
const keyContextKey = "idempotency.key"

// RedactedKey names the request's idempotency key in logs without
// revealing it: the first 12 hex digits of its SHA-256. Empty when the
// request carried no valid key.
func RedactedKey(c *gin.Context) string {
	return redact(c.GetString(keyContextKey))
}

// redact is a key's first 12 hex digits of SHA-256; empty for no key.
func redact(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// Replayed reports whether the answer sent was a stored one, replayed.
func Replayed(c *gin.Context) bool { return c.Writer.Header().Get(ReplayedHeader) == "true" }
