package tests

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Every JSON write route of the API, taken from the router, answers a body
// that is not a JSON object (null, an array, a string, a number) with 400
// malformed-request before any key is claimed: no row is written, no order
// cancelled, no token revoked. Go's decoder once read null as {}, and a
// staff refund of null refunded everything left.
func TestEveryJSONWriteRouteRefusesABodyThatIsNotAnObject(t *testing.T) {
	e := newEnv(t)
	staff, _ := e.staffToken("staff@example.com")
	_, paid := e.shopperOrder("ann@example.com")
	pending := e.createOrder(staff, "pending", orderBody(e.products()[0], 1))
	tables := []string{"users", "api_tokens", "orders", "payments", "payment_attempts", "refunds", "refund_requests",
		"idempotency_keys", "events", "audit_entries", "simulated_charges", "simulated_refunds"}
	written := func() []int64 {
		counts := []int64{e.count("orders", "status = ?", "cancelled")}
		for _, table := range tables {
			counts = append(counts, e.count(table))
		}
		return counts
	}
	routes := 0
	for _, route := range e.server.Routes() {
		if !strings.HasPrefix(route.Path, "/api/v1/") || route.Method == http.MethodGet {
			continue
		}
		routes++
		order := paid
		if strings.HasSuffix(route.Path, "/cancel") {
			order = pending
		}
		path := strings.NewReplacer(":id", order).Replace(route.Path)
		for i, body := range []string{`null`, `[]`, `"x"`, `42`} {
			before := written()
			r := e.do(request{method: route.Method, path: path, token: staff, key: key(fmt.Sprint(route.Path, i)), body: " " + body, offContract: true})
			if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "/problems/malformed-request") {
				t.Errorf("%s %s %s: %d %s, want 400 malformed-request", route.Method, route.Path, body, r.Status, r.Body)
			}
			if after := written(); !slices.Equal(before, after) {
				t.Errorf("%s %s %s wrote: cancelled orders and %v went from %v to %v", route.Method, route.Path, body, tables, before, after)
			}
		}
	}
	if routes < 8 {
		t.Fatalf("only %d JSON write routes found in the router", routes)
	}
	if r := e.do(request{method: "GET", path: "/api/v1/me", token: staff}); r.Status != http.StatusOK {
		t.Fatalf("the token no longer works: %d %s", r.Status, r.Body)
	}
}

// /metrics answers a client behind a trusted proxy (X-Forwarded-For naming
// one that is not loopback) only with the METRICS_TOKEN; a loopback client
// needs none.
func TestMetricsNeedTheTokenBeyondLoopback(t *testing.T) {
	e := newEnv(t, behindProxy, func(d *setup) { d.MetricsToken = "metrics-secret" })
	proxy := proxyTo(t, e.url)
	remote := http.Header{"X-Forwarded-For": {"203.0.113.7"}}
	for _, c := range []struct {
		name, base, token string
		header            http.Header
		want              int
	}{
		{"remote, no token", proxy, "", remote, http.StatusUnauthorized},
		{"remote, wrong token", proxy, "guess", remote, http.StatusUnauthorized},
		{"remote, the token", proxy, "metrics-secret", remote, http.StatusOK},
		{"loopback through the proxy", proxy, "", nil, http.StatusOK},
		{"loopback", e.url, "", nil, http.StatusOK},
	} {
		r, err := sendTo(c.base, request{method: "GET", path: "/metrics", token: c.token, header: c.header})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != c.want || (c.want == http.StatusOK) != strings.Contains(string(r.Body), "shop_http_requests_total") {
			t.Errorf("%s: %d %.80s, want %d", c.name, r.Status, r.Body, c.want)
		}
	}
}
