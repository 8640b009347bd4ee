package middleware

import (
	"net/url"
	"testing"

	"github.com/gin-gonic/gin"
)

// A fingerprint is stored with its key: a change in how it is computed would
// turn every retry of a key stored before an upgrade into a 422. This one was
// computed before the hashing was rewritten to avoid copies.
func TestFingerprintIsStableAcrossVersions(t *testing.T) {
	fp, err := fingerprintOf(request{
		Method: "POST", Route: "/a/:id", Params: gin.Params{{Key: "id", Value: "7"}}, Query: url.Values{"x": {"1"}},
		ContentType: "application/json; charset=utf-8", Body: []byte(`{"b":1,"a":[2,3]}`),
	})
	if want := "745927f40e36020ea01cb528bde25ca52e5e90bbdf616f82b526e46bf9798529"; err != nil || fp != want {
		t.Fatalf("fingerprint %s (%v), want %s", fp, err, want)
	}
}
