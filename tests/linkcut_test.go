package tests

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// postgresForLinks is a PostgreSQL to cut the link to: the suite's
// (TEST_DATABASE_URL), or in the SQLite pass the local one, whose link is
// the fault this test is about.
func postgresForLinks(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		return
	}
	const local = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	db, err := database.Open(local, database.Options{})
	if err == nil {
		err = db.Exec("SELECT 1").Error
		_ = database.Close(db)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is not running on 127.0.0.1:5432: failing, CI=true (%v)", err)
		}
		t.Skipf("PostgreSQL is not running on 127.0.0.1:5432; CI starts it and runs this test (%v)", err)
	}
	t.Setenv("TEST_DATABASE_URL", local)
}

// An instance whose database link is cut answers every write 503
// service-unavailable with Retry-After, never 500, and writes nothing half:
// each key is released, so once the link is back the same requests, with
// the same keys, do their work once. The token is in the instance's cache,
// so the writes reach the middleware and the services before they fail.
func TestACutDatabaseLinkAnswers503AndReleasesTheKey(t *testing.T) {
	postgresForLinks(t)
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	pending := e.createOrder(token, "first", orderBody(e.products()[0], 1))
	l := e.instanceThroughLink()
	send := func(r request) (int, string, string) {
		req, _ := http.NewRequest(r.method, l.url+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if r.key != nil {
			req.Header.Set("Idempotency-Key", *r.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
	}
	if status, _, body := send(request{method: "GET", path: "/api/v1/me"}); status != http.StatusOK {
		t.Fatalf("the token, before the cut: %d %s", status, body)
	}
	writes := []request{
		{method: "POST", path: "/api/v1/orders", key: key("second"), body: orderBody(e.products()[0], 1)},
		e.cancelRequest(token, pending, "cancel", `{}`),
	}
	cancelled := func() int64 { return e.count("orders", "status = ?", models.OrderCancelled) }
	before := e.sideEffects()
	l.cut()
	for _, r := range append(writes, e.payRequest(token, pending, "pay", payments.MethodVisa)) {
		status, retry, body := send(r)
		if status != http.StatusServiceUnavailable || retry == "" || !strings.Contains(body, "/problems/service-unavailable") {
			t.Errorf("%s %s with the link cut: %d, Retry-After %q: %s", r.method, r.path, status, retry, body)
		}
	}
	if after := e.sideEffects(); after != before || cancelled() != 0 {
		t.Fatalf("the cut link wrote: %+v, before %+v", after, before)
	}
	l.restore()
	for _, r := range writes {
		if status, _, body := send(r); status != http.StatusCreated && status != http.StatusOK {
			t.Fatalf("%s %s, the same key after the link is back: %d %s", r.method, r.path, status, body)
		}
	}
	if orders := e.count("orders", "user_id = ?", e.userID("ann@example.com")); orders != 2 {
		t.Fatalf("%d orders, want 2: the first, and the second once", orders)
	}
	if n := cancelled(); n != 1 {
		t.Fatalf("%d cancelled orders, want the first, once", n)
	}
}
