package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shop/shop/payments"
)

// Hostile and malformed requests each get a 4xx problem, never a 5xx, and
// write nothing: no user, order, payment, charge or stored answer, and no
// key left held. (A request refused by its handler leaves its key released,
// which is no answer: the next request with that key runs.)
func TestHostileRequestsAreRefused(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.signUp("alice@example.com"), e.signUp("bob@example.com")
	p := e.products()
	aliceOrder := e.createOrder(alice, "alice-order", orderBody(p[0], 1))
	bobOrder := e.createOrder(bob, "bob-order", orderBody(p[1], 1))
	ordersPath, payPath := "/api/v1/orders", "/api/v1/orders/"+aliceOrder+"/payments"
	good := orderBody(p[0], 1)
	huge := `{"items":[{"product_id":"` + p[0] + `","quantity":1}],"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	lines := make([]any, 0, 102)
	for i := range 51 {
		lines = append(lines, fmt.Sprintf("00000000-0000-0000-0000-%012d", i), 1)
	}
	k := func(s string) *string { return &s }

	order := func(body string) request {
		return request{method: "POST", path: ordersPath, token: alice, key: k("hostile"), body: body}
	}
	pay := func(path, body string) request {
		return request{method: "POST", path: path, token: alice, key: k("hostile"), body: body}
	}
	withKey := func(r request, key *string) request { r.key = key; return r }
	withType := func(r request, ct string) request { r.contentType = ct; return r }
	withHeader := func(r request, name string, values ...string) request {
		r.header = http.Header{name: values}
		return r
	}
	cases := []struct {
		name   string
		r      request
		status int
		typ    string
	}{
		// Authentication.
		{"no token", withHeader(request{method: "POST", path: ordersPath, key: k("x"), body: good}, "X-None"), 401, "unauthorized"},
		{"unknown token", request{method: "POST", path: ordersPath, token: "shp_forged", key: k("x"), body: good}, 401, "unauthorized"},
		{"token SQL", request{method: "POST", path: ordersPath, token: "' OR '1'='1", key: k("x"), body: good}, 401, "unauthorized"},
		{"basic scheme", withHeader(request{method: "POST", path: ordersPath, key: k("x"), body: good}, "Authorization", "Basic YTpi"), 401, "unauthorized"},
		{"empty bearer", withHeader(request{method: "POST", path: ordersPath, key: k("x"), body: good}, "Authorization", "Bearer "), 401, "unauthorized"},
		// Keys.
		{"no key", withKey(order(good), nil), 400, "idempotency-key-missing"},
		{"empty key", withKey(order(good), k("")), 400, "idempotency-key-invalid"},
		{"256-byte key", withKey(order(good), k(strings.Repeat("a", 256))), 400, "idempotency-key-invalid"},
		{"64 KiB key", withKey(order(good), k(strings.Repeat("a", 64<<10))), 400, "idempotency-key-invalid"},
		{"unicode key", withKey(order(good), k("ключ-🔑")), 400, "idempotency-key-invalid"},
		{"SQL key", withKey(order(good), k("'; DROP TABLE orders; --")), 400, "idempotency-key-invalid"},
		{"key with parameters", withKey(order(good), k(`"k";drop=1`)), 400, "idempotency-key-invalid"},
		{"two keys", withHeader(withKey(order(good), nil), "Idempotency-Key", "a", "b"), 400, "idempotency-key-invalid"},
		// Bodies.
		{"body over 1 MiB", order(huge), 413, "request-too-large"},
		{"empty body", withHeader(order(""), "Content-Type", "application/json"), 400, "malformed-request"},
		{"invalid JSON", order(`{"items":[`), 400, "malformed-request"},
		{"duplicate JSON keys", order(`{"items":[],"items":[{"product_id":"` + p[0] + `","quantity":1}]}`), 400, "malformed-request"},
		{"two JSON values", order(good + good), 400, "malformed-request"},
		{"unknown field", order(`{"items":[{"product_id":"` + p[0] + `","quantity":1}],"total_cents":1}`), 422, "validation"},
		{"JSON array", order(`[]`), 400, "malformed-request"},
		{"nested 100000 deep", order(deep), 400, "malformed-request"},
		{"invalid UTF-8", order("{\"items\":[{\"product_id\":\"\xff\xfe\",\"quantity\":1}]}"), 400, "malformed-request"},
		{"text/plain", withType(order(good), "text/plain"), 415, "unsupported-media-type"},
		{"form", withType(order("items=1"), "application/x-www-form-urlencoded"), 415, "unsupported-media-type"},
		{"XML", withType(order("<items/>"), "application/xml"), 415, "unsupported-media-type"},
		{"another JSON type", withType(order(good), "application/merge-patch+json"), 415, "unsupported-media-type"},
		// Values.
		{"negative quantity", order(orderBody(p[0], -1)), 422, "validation"},
		{"zero quantity", order(orderBody(p[0], 0)), 422, "validation"},
		{"huge quantity", order(orderBody(p[0], 1000000000)), 422, "validation"},
		{"quantity beyond int64", order(orderBody(p[0], "1e30")), 422, "validation"},
		{"fractional quantity", order(orderBody(p[0], 1.5)), 422, "validation"},
		{"quantity as string", order(orderBody(p[0], `"1"`)), 422, "validation"},
		{"no items", order(`{"items":[]}`), 422, "validation"},
		{"null items", order(`{"items":null}`), 422, "validation"},
		{"51 lines", order(orderBody(lines...)), 422, "validation"},
		{"unknown product", order(orderBody("00000000-0000-0000-0000-000000000000", 1)), 422, "validation"},
		{"SQL product id", order(orderBody("' OR 1=1; --", 1)), 422, "validation"},
		{"unicode product id", order(orderBody("产品-😀-\u202e", 1)), 422, "validation"},
		{"unknown payment method", pay(payPath, payBody("pm_card_stolen")), 422, "validation"},
		{"SQL payment method", pay(payPath, payBody("x'); UPDATE orders SET status='paid'; --")), 422, "validation"},
		{"unicode payment method", pay(payPath, payBody("pm_card_vísa")), 422, "validation"},
		{"payment method as number", pay(payPath, `{"payment_method":4242}`), 422, "validation"},
		// Other people's and made-up orders.
		{"another user's order", pay("/api/v1/orders/"+bobOrder+"/payments", payBody(payments.MethodVisa)), 404, "not-found"},
		{"unknown order", pay("/api/v1/orders/00000000-0000-0000-0000-000000000000/payments", payBody(payments.MethodVisa)), 404, "not-found"},
		{"SQL order id", pay("/api/v1/orders/1'%20OR%20'1'='1/payments", payBody(payments.MethodVisa)), 404, "not-found"},
		{"unicode order id", pay("/api/v1/orders/%E2%80%AE%F0%9F%98%80/payments", payBody(payments.MethodVisa)), 404, "not-found"},
		{"read another user's order", request{method: "GET", path: "/api/v1/orders/" + bobOrder, token: alice}, 404, "not-found"},
		{"method not allowed", request{method: "PUT", path: ordersPath, token: alice, key: k("x"), body: good}, 405, "method-not-allowed"},
		// Accounts.
		{"SQL email", request{method: "POST", path: "/api/v1/users", body: `{"email":"x' OR 1=1 --","password":"correct horse"}`}, 422, "validation"},
		{"token for SQL email", request{method: "POST", path: "/api/v1/tokens", body: `{"email":"' OR ''='","password":"' OR ''='"}`}, 401, "bad-credentials"},
	}
	before := e.sideEffects()
	unchanged := func(t *testing.T) {
		t.Helper()
		got := e.sideEffects()
		got.keyRows = before.keyRows
		if got != before {
			t.Fatalf("wrote %+v, want %+v", got, before)
		}
		if held := e.count("idempotency_keys", "state = ? AND owner_token <> ''", "in_progress"); held != 0 {
			t.Fatalf("%d keys left held", held)
		}
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.offContract = true
			if tc.r.key != nil && *tc.r.key == "hostile" {
				tc.r.key = k(fmt.Sprintf("hostile-%d", i))
			}
			r, err := e.send(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			isProblem(t, r, tc.status, "/problems/"+tc.typ)
			unchanged(t)
		})
	}
	// A body of over 1 MiB without a length (chunked) is refused the same way.
	req, _ := http.NewRequestWithContext(offContract(context.Background()), "POST", e.url+ordersPath, struct{ io.Reader }{strings.NewReader(huge)})
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Idempotency-Key", "chunked")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	isProblem(t, response{Status: resp.StatusCode, Header: resp.Header, Body: body}, http.StatusRequestEntityTooLarge, "/problems/request-too-large")
	unchanged(t)
	// Refused new operations leave no key row, so the middleware's own count
	// tells that hostile requests were claimed and reached a handler.
	if m := e.do(request{method: "GET", path: "/metrics"}); !strings.Contains(string(m.Body), `shop_idempotency_outcomes_total{outcome="claimed",route="/api/v1/orders/:id/payments"}`) {
		t.Fatal("no hostile request reached a handler: the table tested only the gates")
	}
}

// A NUL character (valid in JSON as \u0000) and bytes that are not UTF-8
// (possible in a form) are refused with a 4xx, never a 5xx: PostgreSQL
// cannot store them, SQLite just finds nothing. Nothing is written.
func TestUnstorableCharactersAreRefused(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	ids := e.products()
	orderID := e.createOrder(token, "first", orderBody(ids[0], 1))
	s := e.shopper()
	s.signUp("bob@example.com")
	before := e.sideEffects()

	api := []request{
		{method: "POST", path: "/api/v1/orders", token: token, key: key("nul-1"), body: orderBody(`\u0000`, 1)},
		{method: "POST", path: "/api/v1/orders", token: token, key: key("nul-2"), body: orderBody(ids[0]+`\u0000`, 1)},
		{method: "POST", path: "/api/v1/tokens", body: `{"email":"a\u0000@example.com","password":"correct horse"}`},
		{method: "POST", path: "/api/v1/users", body: `{"email":"a\u0000@example.com","password":"correct horse"}`},
		{method: "GET", path: "/api/v1/orders/%00", token: token},
		{method: "POST", path: "/api/v1/orders/" + orderID + "%00/payments", token: token, key: key("nul-3"), body: payBody(payments.MethodVisa)},
	}
	for _, r := range api {
		got := e.do(r)
		if got.Status < 400 || got.Status >= 500 || got.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s %s: %d %s, want a 4xx problem", r.method, r.path, r.body, got.Status, got.Body)
		}
	}
	forms := []struct {
		path string
		form url.Values
	}{
		{"/login", url.Values{"email": {"a\x00@example.com"}, "password": {"correct horse"}}},
		{"/login", url.Values{"email": {"\xff\xfe@example.com"}, "password": {"correct horse"}}},
		{"/orders", url.Values{"idempotency_key": {"nul-form"}, "qty-" + ids[0]: {"1"}, "qty-\x00": {"1"}}},
		{"/orders/" + orderID + "\xff/payments", url.Values{"idempotency_key": {"bad-bytes"}, "payment_method": {payments.MethodVisa}}},
	}
	for _, f := range forms {
		got := s.post(strings.ReplaceAll(url.PathEscape(f.path), "%2F", "/"), f.form)
		if got.Status < 400 || got.Status >= 500 || !strings.HasPrefix(got.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("POST %q %v: %d %s, want a 4xx page", f.path, f.form, got.Status, got.Body)
		}
	}
	if got := e.sideEffects(); got.users != before.users || got.orders != before.orders || got.payments != before.payments || got.charges != before.charges || got.storedKeys != before.storedKeys {
		t.Fatalf("side effects %+v, want %+v", got, before)
	}
}

// One body, two meanings: RFC 8785 keeps keys that differ only in case and
// sorts them, so both orders of such a pair share a fingerprint, while
// encoding/json reads the last of them into the field. Each body is refused
// with 400 before it is fingerprinted, so no key is claimed, no answer is
// stored and nothing reaches the provider.
func TestJSONKeysDifferingInCaseAreRefused(t *testing.T) {
	e := newEnv(t)
	alice := e.signUp("alice@example.com")
	p := e.products()
	orderID := e.createOrder(alice, "order", orderBody(p[0], 1))
	payPath := "/api/v1/orders/" + orderID + "/payments"
	before := e.sideEffects()
	bodies := []struct{ path, body string }{
		{payPath, `{"payment_method":"pm_card_declined","PAYMENT_METHOD":"pm_card_visa"}`},
		{payPath, `{"PAYMENT_METHOD":"pm_card_visa","payment_method":"pm_card_declined"}`},
		{"/api/v1/orders", `{"items":[{"product_id":"` + p[0] + `","Product_Id":"` + p[1] + `","quantity":1}]}`},
		{"/api/v1/orders", `{"items":[{"Product_Id":"` + p[1] + `","product_id":"` + p[0] + `","quantity":1}]}`},
	}
	for _, b := range bodies {
		// The same key for every pair, as a client replaying the trick would.
		r := e.do(request{method: "POST", path: b.path, token: alice, key: key("two-meanings"), body: b.body, offContract: true})
		isProblem(t, r, http.StatusBadRequest, "/problems/malformed-request")
		if !strings.Contains(string(r.Body), "differ only in case") {
			t.Fatalf("the problem does not say what is wrong: %s", r.Body)
		}
	}
	if got := e.sideEffects(); got != before {
		t.Fatalf("side effects %+v, want %+v", got, before)
	}
}
