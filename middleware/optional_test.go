package middleware

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
)

// A route whose key is optional (sign-up): without a key the handler runs
// as if the middleware were not there, every time, and no row is written;
// with one it runs once, anonymous requests included, and its repeats get
// its answer. The key's row keeps keyed digests of the request and the
// handler's answer, never the password the body carried; the same key with
// another password is refused. A route without OptionalKey still wants a
// principal and a key.
func TestOptionalKeyRunsOnceWithAKeyAndAsBeforeWithout(t *testing.T) {
	h := newHarness(t, withDigestKey([]byte(strings.Repeat("d", MinDigestKey))))
	var runs atomic.Int64
	r := gin.New()
	r.Use(h.authenticate)
	r.POST("/users", OptionalKey, h.mw.Require(), func(c *gin.Context) {
		c.JSON(http.StatusCreated, gin.H{"run": runs.Add(1)}) // writes of its own, as a sign-up's
	})
	srv := httptest.NewServer(r)
	t.Cleanup(func() { closeServer(t, srv) })
	const password = "correct horse battery"
	signUp := func(key, pw string) answer {
		return h.do(call{base: srv.URL, path: "/users", user: "-", key: key, body: fmt.Sprintf(`{"email":"ann@example.com","password":%q}`, pw)})
	}

	for i := range 2 {
		if a := signUp("", password); a.status != http.StatusCreated || a.replayed() || a.run() != i+1 {
			t.Fatalf("keyless sign-up %d: %d replayed=%v run %d", i+1, a.status, a.replayed(), a.run())
		}
	}
	h.wantKeys()
	for i := range 2 {
		wantAnswer(t, signUp("k", password), http.StatusCreated, i == 1)
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want 3: twice without a key, once with", n)
	}
	h.wantKeys(anonymousScope + "/k=completed")
	k, _ := h.key(anonymousScope, "k")
	row := fmt.Sprintf("%+v %s %s", k, k.Body, k.Headers)
	if strings.Contains(row, password) || !strings.HasPrefix(k.Fingerprint, keyedPrefix) {
		t.Fatalf("the key's row tells the request: %s", row)
	}
	wantProblem(t, signUp("k", "another password"), refuseKeyReused)
	wantProblem(t, signUp(`"un`, password), refuseKeyInvalid)
	if n := runs.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want 3", n)
	}

	wantProblem(t, h.do(call{user: "-", key: "w", body: "{}"}), refuseUnauthenticated)
	wantProblem(t, h.do(call{body: "{}"}), refuseKeyMissing)
	h.wantRuns("/widgets/1", 0)
}

// A request refused before anything was done leaves no row: a new
// operation that answered 404, or that never asked for its derived key,
// is forgotten when released. One whose derived key left the middleware
// keeps its released row, and a 404 after a release does not forget the
// operation an earlier attempt handed out.
func TestRefusedNewOperationsLeaveNoRow(t *testing.T) {
	h := newHarness(t)
	for i := range 20 {
		wantAnswer(t, h.do(call{key: fmt.Sprintf("nf-%d", i), path: "/widgets/1?status=404", body: "{}"}), http.StatusNotFound, false)
	}
	h.wantKeys()
	h.wantWidgets()

	r := gin.New()
	r.Use(h.authenticate)
	r.POST("/refused", h.mw.Require(), func(c *gin.Context) { c.Status(http.StatusUnprocessableEntity) })
	srv := httptest.NewServer(r)
	t.Cleanup(func() { closeServer(t, srv) })
	wantAnswer(t, h.do(call{base: srv.URL, path: "/refused", key: "bad", body: "{}"}), http.StatusUnprocessableEntity, false)
	h.wantKeys()

	first := h.do(call{key: "k", path: "/widgets/1?status=503", body: "{}"})
	wantAnswer(t, first, http.StatusServiceUnavailable, false)
	h.wantKeys("alice/k=released")
	wantAnswer(t, h.do(call{key: "k", path: "/widgets/1?status=404", body: "{}"}), http.StatusNotFound, false)
	h.wantKeys("alice/k=released")
	if again := h.do(call{key: "k", path: "/widgets/1", body: "{}"}); again.status != http.StatusCreated || again.derived() != first.derived() {
		t.Fatalf("the retry: %d %s, want 201 under the derived key %s", again.status, again.body, first.derived())
	}
	h.wantKeys("alice/k=completed")
}
