package tests

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/database"
	"github.com/shop/shop/middleware"
)

// withPushes runs the shop as main does, pushing completed answers to the
// other instances (on PostgreSQL), under the SESSION_SECRET secret.
func withPushes(secret string) option {
	return func(deps *setup) { deps.PushAnswers, deps.SessionSecret = true, []byte(secret) }
}

// refusedPushes reads how many pushes the instance at base dropped, from
// its metrics.
func (e *env) refusedPushes(base string) int {
	e.t.Helper()
	const name = "shop_idempotency_pushes_refused_total "
	for line := range strings.Lines(string(e.at(base, request{method: "GET", path: "/metrics"}).Body)) {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				e.t.Fatal(err)
			}
			return int(n)
		}
	}
	e.t.Fatal("the metrics do not count refused pushes")
	return 0
}

// forgeAnswer is a made-up answer for a shopper's key, as someone who can
// only connect to the database writes it by hand: the key's scope,
// operation, fingerprint and digest copied from its row, a redirect to a
// phishing page, a session cookie and a body of its own.
func (e *env) forgeAnswer(key string) string {
	e.t.Helper()
	var row middleware.IdempotencyKey
	if err := e.db.Where(`"key" = ?`, key).Take(&row).Error; err != nil {
		e.t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf(`{"from":"psql","scope":%q,"key":%q,"op":%q,"method":%q,"route":%q,"fp":%q,"raw":%q,"exp":%q,"status":201,`+
		`"headers":{"Content-Type":["application/json"],"Location":["https://evil.example/phish"],"Set-Cookie":["shop_session=attacker"]},"body":%q}`,
		row.Scope, row.Key, row.OperationID, row.Method, row.Route, row.Fingerprint, b64(row.RawDigest),
		row.ExpiresAt.Format(time.RFC3339Nano), b64([]byte(`{"id":"forged","status":"paid"}`)))
}

// A NOTIFY from a plain database connection — what any role that can
// connect may send, a read-only one included — with a made-up answer for
// a real shopper's key and fingerprint changes no answer: both instances
// of the shop, which share SESSION_SECRET, drop and count it, and the
// retry on either gets the answer the database holds, without the forged
// status, Location, Set-Cookie or body. The instances' own pushes still
// arrive, and an instance under another SESSION_SECRET keeps none of them
// (nor can it tell the deployment's keyed request hashes: a retry there is
// refused 422 and writes nothing — every instance must share the secret).
// (On SQLite nothing is pushed, and nothing can be forged: the retries
// replay the stored answer.)
func TestForgedNotifyChangesNoShoppersAnswer(t *testing.T) {
	e := newEnv(t, withPushes(strings.Repeat("s", 32)))
	otherServer := newServer(t, e.deps)
	other := httptest.NewServer(otherServer)
	t.Cleanup(other.Close)
	strangerDeps := e.deps
	strangerDeps.SessionSecret = []byte(strings.Repeat("x", 32))
	stranger := httptest.NewServer(newServer(t, strangerDeps))
	t.Cleanup(stranger.Close)
	token := e.signUp("victim@example.com")
	order := func(k string) request {
		return request{method: "POST", path: "/api/v1/orders", token: token, key: key(k), body: orderBody(e.products()[0], 1)}
	}
	real := e.do(order("order-1"))
	if real.Status != http.StatusCreated {
		t.Fatalf("order: %d %s", real.Status, real.Body)
	}

	if database.IsPostgres(e.db) {
		forged := e.forgeAnswer("order-1")
		// Sent again until every instance has counted one: a listener may
		// still be starting, and a dropped push shows nowhere else.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if err := e.db.Exec(`SELECT pg_notify('idempotency:' || current_schema(), ?)`, forged).Error; err != nil {
				t.Fatal(err)
			}
			if e.refusedPushes(e.url) > 0 && e.refusedPushes(other.URL) > 0 && e.refusedPushes(stranger.URL) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the forged push was not counted: %d, %d, %d dropped",
					e.refusedPushes(e.url), e.refusedPushes(other.URL), e.refusedPushes(stranger.URL))
			}
		}
	}
	// The shop's own push reaches the instance with its secret, and is
	// refused by the one under another.
	cached, strangerRefused := otherServer.ReplayCache().Entries, e.refusedPushes(stranger.URL)
	if r := e.do(order("order-2")); r.Status != http.StatusCreated {
		t.Fatalf("second order: %d %s", r.Status, r.Body)
	}
	if database.IsPostgres(e.db) {
		until(t, "the second order's push", func() bool {
			return otherServer.ReplayCache().Entries > cached && e.refusedPushes(stranger.URL) > strangerRefused
		})
	}

	if got := e.at(stranger.URL, order("order-1")); got.Status != http.StatusUnprocessableEntity || got.replayed() {
		t.Fatalf("retry on the stranger instance: %d replayed=%v %s; want 422, nothing replayed", got.Status, got.replayed(), got.Body)
	}
	for name, base := range map[string]string{"this": e.url, "other": other.URL} {
		got := e.at(base, order("order-1"))
		if got.Status != real.Status || !bytes.Equal(got.Body, real.Body) || !got.replayed() ||
			got.Header.Get("Location") != real.Header.Get("Location") || got.Header.Values("Set-Cookie") != nil {
			t.Fatalf("retry on the %s instance: %d %v %s; want the stored %d %v %s",
				name, got.Status, got.Header, got.Body, real.Status, real.Header, real.Body)
		}
	}
	if n := e.count("orders"); n != 2 {
		t.Fatalf("%d orders, want the two placed", n)
	}
	if !strings.HasPrefix(real.Header.Get("Location"), "/api/v1/orders/") {
		t.Fatalf("the order's Location is %q", real.Header.Get("Location"))
	}
}
