package middleware

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

var testDigestKey = bytes.Repeat([]byte{7}, MinDigestKey)

// passwordBody is a request whose body holds a secret the key's row must
// not let a reader test guesses of.
const passwordBody = `{"name":"bolt","password":"correct horse battery staple"}`

func passwordRequest(body string) request {
	return request{
		Method: http.MethodPost, Route: "/widgets/:id", Params: gin.Params{{Key: "id", Value: "1"}},
		Query: url.Values{}, ContentType: "application/json", Body: []byte(body),
	}
}

// With a DigestKey, the row keeps neither hash a reader could compute from
// a guessed body, and the key still replays its own request and refuses
// another.
func TestKeyedDigestsTellNothingOfTheBody(t *testing.T) {
	h := newHarness(t, withDigestKey(testDigestKey))
	first := h.do(call{key: "k1", body: passwordBody})
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	row, ok := h.key("alice", "k1")
	if !ok {
		t.Fatal("no key row")
	}
	plain := mustFingerprint(t, passwordRequest(passwordBody))
	raw := digester{}.raw(request{Method: http.MethodPost, Route: "/widgets/:id", Params: gin.Params{{Key: "id", Value: "1"}}, ContentType: "application/json", Body: []byte(passwordBody)}, "")
	if row.Fingerprint == plain || !strings.HasPrefix(row.Fingerprint, keyedPrefix) || len(row.Fingerprint) > 64 {
		t.Fatalf("fingerprint %q: want the keyed form, not the plain SHA-256 %q", row.Fingerprint, plain)
	}
	if len(row.RawDigest) != len(raw) || bytes.Equal(row.RawDigest, raw[:]) {
		t.Fatalf("raw digest %x: want an HMAC of its length, not the plain SHA-256", row.RawDigest)
	}
	again := h.do(call{key: "k1", body: `{"password":"correct horse battery staple","name":"bolt"}`})
	if again.status != http.StatusCreated || !again.replayed() {
		t.Fatalf("the same request rewritten: %d replayed=%v, want the replay", again.status, again.replayed())
	}
	other := h.do(call{key: "k1", body: `{"name":"bolt","password":"guess"}`})
	if other.status != http.StatusUnprocessableEntity {
		t.Fatalf("another request under the key: %d, want 422", other.status)
	}
	h.wantRuns("/widgets/1", 1)
}

// A key stored before the DigestKey was set (an upgrade) still replays its
// own request, and still refuses another.
func TestRowsFromBeforeTheDigestKeyStillMatch(t *testing.T) {
	h := newHarness(t)
	if a := h.do(call{key: "k1", body: passwordBody}); a.status != http.StatusCreated {
		t.Fatalf("first: %d %s", a.status, a.body)
	}
	if row, _ := h.key("alice", "k1"); row.Fingerprint != mustFingerprint(t, passwordRequest(passwordBody)) {
		t.Fatalf("without a key the fingerprint is the plain one, got %q", row.Fingerprint)
	}
	h.mw.digest = newDigester(testDigestKey) // the upgrade
	again := h.do(call{key: "k1", body: `{"password":"correct horse battery staple","name":"bolt"}`})
	if again.status != http.StatusCreated || !again.replayed() {
		t.Fatalf("the same request after the key was set: %d replayed=%v, want the replay", again.status, again.replayed())
	}
	if other := h.do(call{key: "k1", body: `{"name":"bolt","password":"guess"}`}); other.status != http.StatusUnprocessableEntity {
		t.Fatalf("another request after the key was set: %d, want 422", other.status)
	}
	h.wantRuns("/widgets/1", 1)
}

func TestShortDigestKeyIsRefused(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a 31-byte DigestKey was accepted")
		}
	}()
	newDigester(make([]byte, MinDigestKey-1))
}
