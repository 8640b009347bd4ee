package middleware

// Replay: a completed key's answer, sent again verbatim to every repeat,
// from this instance's cache when it has it, else from the key's row.

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
)

// Where a replayed answer was found: this instance's cache, or the key's row.
var (
	fromMemory   = attribute.String("idempotency.replayed_from", "memory")
	fromDatabase = attribute.String("idempotency.replayed_from", "database")
)

// replayCached answers from an answer this instance has cached: replayed
// when it is the same request, refused when the key named another.
func (m *Idempotency) replayCached(c *gin.Context, want IdempotencyKey, a *cached, waited bool) {
	if !sameRequest(a.fingerprint, want) {
		m.mismatch(c, want.Route, a.method, a.route)
		return
	}
	m.replay(c, a, fromMemory, waited)
}

// replayStored answers from the completed key found, and caches its answer
// under sk for the next repeat.
func (m *Idempotency) replayStored(c *gin.Context, sk scopedKey, found IdempotencyKey, raw [sha256.Size]byte, waited bool) {
	var headers http.Header
	if err := json.Unmarshal([]byte(found.Headers), &headers); err != nil {
		m.internal(c, "decode stored response", err)
		return
	}
	a := answerOf(found, raw, found.Status, headers, found.Body)
	m.answers.put(a)
	m.replay(c, a, fromDatabase, waited)
}

// replay sends the stored answer verbatim, marked as replayed; from says
// where the answer was found, on the request's span.
func (m *Idempotency) replay(c *gin.Context, a *cached, from attribute.KeyValue, waited bool) {
	// Counted in memory before the answer goes out, so that what a client
	// has seen is already in the count Keys reports; the row is updated
	// later, in a batch, so a replay writes nothing.
	m.replays.add(a.replayOf)
	outcome := OutcomeReplayed
	if waited {
		outcome = OutcomeWaitedReplayed
	}
	if span := m.observe(c.Request.Context(), c.FullPath(), outcome); span.IsRecording() {
		span.SetAttributes(from)
	}
	send(c.Writer, a.headers, ReplayedHeader, a.status, a.body)
	c.Abort()
}

// Replayed reports whether the answer sent was a stored one, replayed.
func Replayed(c *gin.Context) bool { return c.Writer.Header().Get(ReplayedHeader) == "true" }
