package middleware

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Refusal is the middleware's own answer, instead of the handler's: an RFC 9457 problem document.
type Refusal struct {
	// Type names the refusal for machines, stably: "idempotency-key-reused".
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail,omitempty"` // what was wrong with this request
	RetryAfter int    `json:"-"`                // when positive, in seconds
	// Cause is why the key's table failed (an internal refusal's), for a
	// renderer that tells a database out of reach (503) from a bug.
	Cause error `json:"-"`
}

// The refusals, without their detail: each slug, status and title is written
// here only (problem/refusals_gen.go is generated from these lines).
var (
	refuseUnauthenticated = Refusal{Status: http.StatusUnauthorized, Type: "unauthorized", Title: "Authentication required"}
	refuseKeyMissing      = Refusal{Status: http.StatusBadRequest, Type: "idempotency-key-missing", Title: "Idempotency key required"}
	refuseKeyInvalid      = Refusal{Status: http.StatusBadRequest, Type: "idempotency-key-invalid", Title: "Idempotency key invalid"}
	refuseTooLarge        = Refusal{Status: http.StatusRequestEntityTooLarge, Type: "request-too-large", Title: "Request body too large"}
	refuseMalformed       = Refusal{Status: http.StatusBadRequest, Type: "malformed-request", Title: "Malformed request"}
	refuseKeyReused       = Refusal{Status: http.StatusUnprocessableEntity, Type: "idempotency-key-reused", Title: "Idempotency key reused with a different request"}
	refuseInProgress      = Refusal{Status: http.StatusConflict, Type: "idempotency-key-in-progress", Title: "Request with this idempotency key still in progress", RetryAfter: 1}
	refuseLeaseLost       = Refusal{Status: http.StatusConflict, Type: "idempotency-lease-lost", Title: "Request took too long and was taken over", RetryAfter: 1}
	refuseInternal        = Refusal{Status: http.StatusInternalServerError, Type: "internal", Title: "Internal error"}
)

// Refusals lists every refusal, for an application to check it knows each.
var Refusals = []Refusal{
	refuseUnauthenticated, refuseKeyMissing, refuseKeyInvalid, refuseTooLarge, refuseMalformed,
	refuseKeyReused, refuseInProgress, refuseLeaseLost, refuseInternal,
}

func (r Refusal) with(detail string) Refusal {
	r.Detail = detail
	return r
}

// writeRefusal, the default Config.Refuse, sends problem+json.
func writeRefusal(c *gin.Context, r Refusal) {
	if r.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(r.RetryAfter))
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Type", "application/problem+json") // kept by c.JSON
	c.JSON(r.Status, r)
}
