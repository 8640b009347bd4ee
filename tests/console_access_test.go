package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// staffOnly reports a route only staff may use: the console's pages and
// forms, the staff API, and the refunds, which staff give.
func staffOnly(method, path string) bool {
	return strings.HasPrefix(path, "/staff") || strings.HasPrefix(path, "/api/v1/staff") ||
		(method == http.MethodPost && path == "/api/v1/orders/:id/refunds")
}

// consoleWrites counts what a refused staff request must not have written:
// refunds, idempotency keys, the provider's refunds, refund requests
// answered, orders cancelled, and the units on hand.
func (e *env) consoleWrites() [6]int64 {
	e.t.Helper()
	var stock int64
	if err := e.db.Table("products").Select("COALESCE(SUM(stock), 0)").Scan(&stock).Error; err != nil {
		e.t.Fatal(err)
	}
	return [6]int64{e.count("refunds"), e.count("idempotency_keys"), e.count("simulated_refunds"),
		e.count("refund_requests", "state <> ?", models.RequestOpen), e.count("orders", "status = ?", models.OrderCancelled), stock}
}

// Every staff route, as the router lists it (so that a new one cannot be
// left out), refuses anyone but staff, before any key is claimed: a page
// is not found (404) for a shopper's session, a shopper's token and no
// session alike; a write is refused (403); the staff API answers a
// shopper's token 403 forbidden and no token 401. Nothing is written, and
// the provider's refund ledger is unchanged. A staff session reads the
// same pages.
func TestConsoleRefusesAnyoneButStaff(t *testing.T) {
	e := newEnv(t)
	s := e.shopper()
	s.signUp("owner@example.com")
	ids := e.products()
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	orderID := strings.TrimPrefix(orderPath, "/orders/")
	s.post(orderPath+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}})
	var req models.RefundRequest
	must(t, e.db.Take(&req).Error)
	var attempt models.PaymentAttempt
	must(t, e.db.Take(&attempt).Error)
	token := e.signUp("other@example.com")
	params := strings.NewReplacer(":id", orderID, ":request_id", attempt.ID, ":kind", orders.DoubtPayment)
	staff := e.staffBrowser("staff@example.com")
	form := url.Values{"idempotency_key": {"refused"}, "amount": {"1.00"}, "reason": {"refused"}, "sku": {"sku"}, "stock": {"0"}}

	callers := []struct {
		name   string
		send   func(method, path string) (response, error)
		status func(method, path string) int
	}{
		{"no session", func(method, path string) (response, error) { return e.sendAs("", method, path, form) }, refusedStatus(http.StatusUnauthorized)},
		{"a shopper's session", func(method, path string) (response, error) {
			return s.send(method, path, formOf(method, form), nil)
		}, refusedStatus(http.StatusUnauthorized)},
		{"a shopper's token", func(method, path string) (response, error) { return e.sendAs(token, method, path, form) }, refusedStatus(http.StatusForbidden)},
	}
	routes := 0
	for _, route := range e.server.Routes() {
		if !staffOnly(route.Method, route.Path) {
			continue
		}
		routes++
		path := params.Replace(route.Path)
		for _, caller := range callers {
			t.Run(route.Method+" "+route.Path+" by "+caller.name, func(t *testing.T) {
				before := e.consoleWrites()
				r, err := caller.send(route.Method, path)
				must(t, err)
				if want := caller.status(route.Method, route.Path); r.Status != want {
					t.Fatalf("%d, want %d: %s", r.Status, want, r.Body)
				}
				if after := e.consoleWrites(); after != before {
					t.Fatalf("written by the refusal: %v after, %v before", after, before)
				}
			})
		}
		if route.Method == http.MethodGet && strings.HasPrefix(route.Path, "/staff") {
			if r := staff.get(path); r.Status != http.StatusOK {
				t.Fatalf("staff read %s: %d %s", path, r.Status, r.Body)
			}
		}
	}
	if routes < 12 {
		t.Fatalf("%d staff routes found in the router, want the console's 9, the staff API's 2 and the refunds", routes)
	}
	if n, _ := e.refunded(); n != 0 {
		t.Fatalf("the provider refunded %d times", n)
	}
}

// refusedStatus is how a staff route refuses a caller who is not staff: a
// page is not found, a console write forbidden, and an API route answers
// api (401 without a token, 403 with a shopper's).
func refusedStatus(api int) func(method, path string) int {
	return func(method, path string) int {
		switch {
		case strings.HasPrefix(path, "/api/"):
			return api
		case method == http.MethodGet:
			return http.StatusNotFound
		}
		return http.StatusForbidden
	}
}

// formOf is the form a request sends: none with a GET.
func formOf(method string, form url.Values) url.Values {
	if method == http.MethodGet {
		return nil
	}
	return form
}

// sendAs sends a request as a browser would, with the bearer token when
// there is one: a JSON body to the API, the form elsewhere.
func (e *env) sendAs(token, method, path string, form url.Values) (response, error) {
	if strings.HasPrefix(path, "/api/") {
		r := request{method: method, path: path, token: token}
		if method != http.MethodGet {
			r.key, r.body = key("refused"), `{"reason":"refused"}`
		}
		return e.send(r)
	}
	s := e.shopper()
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	return s.send(method, path, formOf(method, form), header)
}

// staffBrowser is a browser signed in as a new staff user.
func (e *env) staffBrowser(email string) *shopper {
	e.t.Helper()
	s := e.shopper()
	s.signUp(email)
	e.makeStaff(email)
	return s
}
