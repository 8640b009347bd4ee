package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
)

func TestAccounts(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, body string
		status     int
		typ        string
	}{
		{"created", `{"email":"New@Example.com","password":"long enough"}`, 201, ""},
		{"email taken, any case", `{"email":"new@example.COM","password":"long enough"}`, 409, "/problems/email-taken"},
		{"bad email", `{"email":"not-an-email","password":"long enough"}`, 422, "/problems/validation"},
		{"short password", `{"email":"short@example.com","password":"1234567"}`, 422, "/problems/validation"},
		{"password over bcrypt's 72 bytes", `{"email":"long@example.com","password":"` + strings.Repeat("p", 73) + `"}`, 422, "/problems/validation"},
		{"unknown field", `{"email":"x@example.com","password":"long enough","admin":true}`, 422, "/problems/validation"},
		{"not JSON", `{"email":`, 400, "/problems/malformed-request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(request{method: "POST", path: "/api/v1/users", body: tc.body, offContract: tc.status == 400 || tc.status == 422})
			if tc.typ == "" {
				if r.Status != tc.status || r.json(t)["email"] != "new@example.com" {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				return
			}
			isProblem(t, r, tc.status, tc.typ)
		})
	}
	if n := e.count("users"); n != 1 {
		t.Fatalf("%d users, want 1", n)
	}
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/users", offContract: true, contentType: "text/plain", body: `{"email":"a@b.co","password":"long enough"}`}),
		http.StatusUnsupportedMediaType, "/problems/unsupported-media-type")

	isProblem(t, e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"new@example.com","password":"wrong password"}`}),
		http.StatusUnauthorized, "/problems/bad-credentials")
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"nobody@example.com","password":"long enough"}`}),
		http.StatusUnauthorized, "/problems/bad-credentials")
	r := e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"NEW@example.com","password":"long enough"}`})
	if r.Status != http.StatusCreated || r.json(t)["token_type"] != "Bearer" {
		t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	token := r.json(t)["token"].(string)
	if r := e.do(request{method: "GET", path: "/api/v1/orders", token: token}); r.Status != http.StatusOK {
		t.Fatalf("token does not work: %d", r.Status)
	}
	var stored string
	e.db.Table("api_tokens").Pluck("token_hash", &stored)
	if stored == token || strings.Contains(stored, token) || len(stored) != 64 {
		t.Fatalf("token stored as %q", stored)
	}
}

// Authentication is checked before the key, and the key before the body.
func TestOrderOfChecks(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("checks@example.com")
	big := `{"items":[],"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := []struct {
		name string
		r    request
		typ  string
		// claims: the request passed the middleware's checks, so the key was
		// claimed and then released; otherwise not even a key row exists.
		claims bool
	}{
		{"no token, no key", request{body: "{}"}, "/problems/unauthorized", false},
		{"bad token, no key", request{token: "shp_nope", body: "{}"}, "/problems/unauthorized", false},
		{"no key, huge body", request{token: token, body: big}, "/problems/idempotency-key-missing", false},
		{"huge body", request{token: token, key: key("k"), body: big}, "/problems/request-too-large", false},
		{"invalid JSON", request{token: token, key: key("k"), body: `{"items":`}, "/problems/malformed-request", false},
		{"duplicate JSON keys", request{token: token, key: key("k"), body: `{"items":[],"items":[]}`}, "/problems/malformed-request", false},
		{"wrong content type", request{token: token, key: key("k"), contentType: "text/plain", body: `{"items":[]}`}, "/problems/unsupported-media-type", true},
		{"no body", request{token: token, key: key("k")}, "/problems/unsupported-media-type", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.method, tc.r.path, tc.r.offContract = "POST", "/api/v1/orders", true
			r := e.do(tc.r)
			if r.Status == http.StatusUnauthorized && r.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			isProblem(t, r, statusOf(tc.typ), tc.typ)
			got := e.sideEffects()
			if got.orders != 0 || got.storedKeys != 0 || !tc.claims && got.keyRows != 0 {
				t.Fatalf("wrote %+v", got)
			}
		})
	}
}

func statusOf(typ string) int {
	for _, t := range problem.All {
		if t.URI() == typ {
			return t.Status
		}
	}
	panic("unknown problem type " + typ)
}

// Every problem type links to a page that documents it and the policy.
func TestProblemTypesAreDocumented(t *testing.T) {
	e := newEnv(t)
	for _, typ := range problem.All {
		r := e.do(request{method: "GET", path: typ.URI()})
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", typ.URI(), r.Status, r.Header.Get("Content-Type"))
		}
		page := string(r.Body)
		for _, want := range []string{typ.Title, "Idempotency-Key", "Retention", "24h0m0s"} {
			if !strings.Contains(page, strings.ReplaceAll(want, "'", "&#39;")) {
				t.Fatalf("%s does not mention %q", typ.URI(), want)
			}
		}
	}
	isProblem(t, e.do(request{method: "GET", path: "/problems/nope"}), 404, "/problems/not-found")
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/nope", offContract: true}), 404, "/problems/not-found")
	isProblem(t, e.do(request{method: "DELETE", path: "/api/v1/products", offContract: true}), 405, "/problems/method-not-allowed")
}

func TestOrdersAndKeysAreListed(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("lists@example.com")
	p := e.products()
	first := e.createOrder(token, "a", orderBody(p[0], 1))
	second := e.createOrder(token, "b", orderBody(p[0], 2, p[1], 3))
	e.createOrder(token, "b", orderBody(p[0], 2, p[1], 3))

	orders := e.do(request{method: "GET", path: "/api/v1/orders", token: token}).json(t)["orders"].([]any)
	if len(orders) != 2 || orders[0].(map[string]any)["id"] != second || orders[1].(map[string]any)["id"] != first {
		t.Fatalf("orders not newest first: %v", orders)
	}
	o := orders[0].(map[string]any)
	var prices = map[string]float64{}
	for _, it := range o["items"].([]any) {
		item := it.(map[string]any)
		prices[item["product_id"].(string)] = item["unit_price_cents"].(float64) * item["quantity"].(float64)
	}
	if o["total_cents"] != prices[p[0]]+prices[p[1]] || o["status"] != "pending" || o["currency"] != "USD" {
		t.Fatalf("order: %v", o)
	}
	// A refused order leaves no key: orders are atomic, so the claim rolled
	// back with the refusal. (A refused payment's key is listed released:
	// TestKeyWhoseReleaseFailedIsReleasedOnceItsLeasePasses.)
	e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("c"), body: orderBody(p[0], 0), offContract: true})
	keys := e.do(request{method: "GET", path: "/api/v1/idempotency-keys", token: token}).json(t)["idempotency_keys"].([]any)
	if len(keys) != 2 {
		t.Fatalf("keys: %v", keys)
	}
	b := keys[0].(map[string]any)
	if b["key"] != "b" || b["route"] != "/api/v1/orders" || b["state"] != "completed" || b["status"] != 201.0 || b["replays"] != 1.0 {
		t.Fatalf("key b: %v", b)
	}
	// Another user sees none of them.
	other := e.signUp("other@example.com")
	if keys := e.do(request{method: "GET", path: "/api/v1/idempotency-keys", token: other}).json(t)["idempotency_keys"].([]any); len(keys) != 0 {
		t.Fatalf("other user sees keys: %v", keys)
	}
	if r := e.do(request{method: "GET", path: "/api/v1/orders/not-a-uuid", token: token}); r.Status != http.StatusNotFound {
		t.Fatalf("bad id: %d", r.Status)
	}
}

// Two payment operations with different keys on one order, at once: the
// order hold lets one reach the provider; one charge in all.
func TestOnePaymentPerOrderAcrossKeys(t *testing.T) {
	e := newEnv(t, withLatency(50*time.Millisecond))
	token := e.signUp("holds@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	requests := make([]request, 10)
	for i := range requests {
		requests[i] = request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token,
			key: key(fmt.Sprintf("pay-%d", i)), body: payBody(payments.MethodVisa)}
	}
	answers := e.concurrently(requests)
	created := 0
	for _, r := range answers {
		switch {
		case r.Status == http.StatusCreated:
			created++
		case r.Status == http.StatusConflict && (strings.Contains(string(r.Body), "order-already-paid") || strings.Contains(string(r.Body), "payment-in-progress")):
		default:
			t.Fatalf("unexpected %d %s", r.Status, r.Body)
		}
	}
	if c, pays := e.charges(), e.count("payments"); created != 1 || c != 1 || pays != 1 {
		t.Fatalf("%d created, %d charges, %d payments; want 1 each", created, c, pays)
	}
}

// Instances starting together on an empty database all come up: the
// migrations take turns, and the catalog is seeded once.
func TestInstancesStartingTogetherMigrateOnce(t *testing.T) {
	databaseURL := testkit.URL(t)
	const instances = 4
	dbs := make([]*gorm.DB, instances)
	for i := range dbs {
		dbs[i] = testkit.Open(t, databaseURL)
	}
	start := make(chan struct{})
	errs := make(chan error, instances)
	for _, db := range dbs {
		go func() {
			<-start
			err := database.Migrate(db)
			if err == nil {
				err = orders.Seed(db)
			}
			errs <- err
		}()
	}
	close(start)
	for range instances {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var products int64
	if err := dbs[0].Model(&models.Product{}).Count(&products).Error; err != nil || products != int64(len(orders.Catalog)) {
		t.Fatalf("%d products (%v), want %d", products, err, len(orders.Catalog))
	}
}

// /metrics counts what the idempotency layer did, by route and outcome, and
// what the payment provider answered.
func TestMetricsCountIdempotencyOutcomes(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("metrics@example.com")
	p := e.products()
	orderID := e.createOrder(token, "a", orderBody(p[0], 1))                                                                        // claimed, stored
	e.createOrder(token, "a", orderBody(p[0], 1))                                                                                   // replayed
	e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("a"), body: orderBody(p[0], 2)})                    // mismatch
	e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("b"), body: orderBody(p[0], 0), offContract: true}) // claimed, released (rolled back: atomic)
	e.createOrder(token, "b", orderBody(p[0], 1))                                                                                   // claimed anew, stored
	pay := "/api/v1/orders/" + orderID + "/payments"
	e.do(request{method: "POST", path: pay, token: token, key: key("p1"), body: payBody(payments.MethodDeclined)})
	e.do(request{method: "POST", path: pay, token: token, key: key("p2"), body: payBody(payments.MethodUnavailable)})
	e.do(request{method: "POST", path: pay, token: token, key: key("p3"), body: payBody(payments.MethodVisa)})

	r := e.do(request{method: "GET", path: "/metrics"})
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.Status)
	}
	text := string(r.Body)
	for _, want := range []string{
		`shop_idempotency_outcomes_total{outcome="claimed",route="/api/v1/orders"} 3`,
		`shop_idempotency_outcomes_total{outcome="stored",route="/api/v1/orders"} 2`,
		`shop_idempotency_outcomes_total{outcome="replayed",route="/api/v1/orders"} 1`,
		`shop_idempotency_outcomes_total{outcome="mismatch",route="/api/v1/orders"} 1`,
		`shop_idempotency_outcomes_total{outcome="released",route="/api/v1/orders"} 1`,
		`shop_idempotency_outcomes_total{outcome="released",route="/api/v1/orders/:id/payments"} 1`,
		`shop_payment_provider_calls_total{result="declined"} 1`,
		`shop_payment_provider_calls_total{result="refused"} 1`,
		`shop_payment_provider_calls_total{result="succeeded"} 1`,
		`shop_http_requests_total{method="POST",route="/api/v1/orders",status="422"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestWrongJSONShapesAreNamedInJSONTerms(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	ids := e.products()
	cases := []struct{ body, typ, says string }{
		{orderBody(ids[0], `"2"`), "/problems/validation", "must be an integer"},
		{`{"items":{"product_id":"x"}}`, "/problems/validation", "must be an array"},
		{`[]`, "/problems/malformed-request", "must be a JSON object, not array"},
		{`"order"`, "/problems/malformed-request", "must be a JSON object, not string"},
	}
	for i, tc := range cases {
		r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key(fmt.Sprint("shape-", i)), body: tc.body, offContract: true})
		isProblem(t, r, r.Status, tc.typ)
		if !strings.Contains(string(r.Body), tc.says) || strings.Contains(string(r.Body), "struct") {
			t.Fatalf("%s: %s, want it to say %q in JSON's words", tc.body, r.Body, tc.says)
		}
	}
	if n := e.count("orders"); n != 0 {
		t.Fatalf("%d orders, want 0", n)
	}
}
