package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// makeStaff makes the user with the email staff, as `shop staff add` does.
func (e *env) makeStaff(email string) {
	e.t.Helper()
	if _, err := accounts.SetRole(e.t.Context(), e.db, email, models.Staff); err != nil {
		e.t.Fatal(err)
	}
}

// staffToken signs up a user, makes it staff and returns its token and id.
func (e *env) staffToken(email string) (string, string) {
	e.t.Helper()
	token := e.signUp(email)
	e.makeStaff(email)
	return token, e.userID(email)
}

// shopperOrder is a shopper's paid order of $19.00: the shopper's token and
// the order.
func (e *env) shopperOrder(email string) (string, string) {
	e.t.Helper()
	token := e.signUp(email)
	orderID := e.createOrder(token, "order-"+email, orderBody(e.productPriced(1900), 1))
	if r := e.do(e.payRequest(token, orderID, "pay-"+email, payments.MethodVisa)); r.Status != http.StatusCreated {
		e.t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	return token, orderID
}

// writes counts what a refused request must not have written: refunds,
// idempotency keys, and the provider's refunds.
func (e *env) writes() [3]int64 {
	e.t.Helper()
	return [3]int64{e.count("refunds"), e.count("idempotency_keys"), e.count("simulated_refunds")}
}

// Every staff-only route refuses a shopper's token — the order's owner's or
// another shopper's — with 403 forbidden, before any key is claimed: no
// refund row, no idempotency key, nothing in the provider's ledger; the
// same key then works for the staff user, whose scope is their own.
func TestShoppersAreRefusedEveryStaffRoute(t *testing.T) {
	e := newEnv(t)
	owner, orderID := e.shopperOrder("owner@example.com")
	other := e.signUp("other@example.com")
	routes := []struct {
		name string
		req  func(token string) request
	}{
		{"refund in full", func(token string) request { return e.refundRequest(token, orderID, "refused", `{}`) }},
		{"partial refund", func(token string) request {
			return e.refundRequest(token, orderID, "refused-part", `{"amount_cents":100,"reason":"asked"}`)
		}},
		{"list webhook deliveries", func(token string) request {
			return request{method: "GET", path: "/api/v1/webhook-deliveries", token: token}
		}},
	}
	for _, route := range routes {
		for who, token := range map[string]string{"the owner": owner, "another shopper": other} {
			t.Run(route.name+" by "+who, func(t *testing.T) {
				before := e.writes()
				r := e.do(route.req(token))
				isProblem(t, r, http.StatusForbidden, "/problems/forbidden")
				if after := e.writes(); after != before {
					t.Fatalf("refunds, keys, provider refunds: %v after the refusal, %v before", after, before)
				}
				if r.Header.Get("Idempotency-Replayed") != "" {
					t.Fatalf("a refusal went through the idempotency middleware: %v", r.Header)
				}
			})
		}
	}
	if o := e.orderJSON(owner, orderID); o["status"] != models.OrderPaid || o["refunded_cents"] != 0.0 {
		t.Fatalf("the order after the refusals: %v", o)
	}
	staff, _ := e.staffToken("staff@example.com")
	if r := e.do(e.refundRequest(staff, orderID, "refused", `{}`)); r.Status != http.StatusCreated {
		t.Fatalf("the staff refund under the key a shopper was refused: %d %s", r.Status, r.Body)
	}
	if n, sum := e.refunded(); n != 1 || sum != 1900 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 1900", n, sum)
	}
}

// A staff user refunds a shopper's order: 201 with created_by the staff
// user; the key is the staff user's (its scope); the shopper reads the
// refund and the refunded order; a retry replays, refunding nothing more.
func TestStaffRefundAnyOrderAndSayWhoGaveIt(t *testing.T) {
	e := newEnv(t)
	shopper, orderID := e.shopperOrder("shopper@example.com")
	staff, staffID := e.staffToken("staff@example.com")
	refund := e.refundRequest(staff, orderID, "staff-refund", `{"amount_cents":700,"reason":"arrived broken"}`)
	r := e.do(refund)
	if r.Status != http.StatusCreated || r.json(t)["created_by"] != staffID || r.json(t)["amount_cents"] != 700.0 {
		t.Fatalf("staff refund: %d %s; want 201 created by %s", r.Status, r.Body, staffID)
	}
	if again := e.do(refund); !again.replayed() || again.Status != http.StatusCreated {
		t.Fatalf("the retry: %d %v %s", again.Status, again.Header, again.Body)
	}
	if n := e.count("idempotency_keys", "scope = ? AND route = ?", staffID, "/api/v1/orders/:id/refunds"); n != 1 {
		t.Fatalf("%d refund keys in the staff user's scope, want 1", n)
	}
	got := e.do(request{method: "GET", path: r.Header.Get("Location"), token: shopper})
	if got.Status != http.StatusOK || got.json(t)["created_by"] != staffID {
		t.Fatalf("the shopper reads the refund: %d %s", got.Status, got.Body)
	}
	if got := e.do(request{method: "GET", path: r.Header.Get("Location"), token: staff}); got.Status != http.StatusOK {
		t.Fatalf("the staff user reads the refund: %d %s", got.Status, got.Body)
	}
	if o := e.orderJSON(shopper, orderID); o["status"] != models.OrderPartiallyRefunded || o["refunded_cents"] != 700.0 {
		t.Fatalf("the shopper's order: %v", o)
	}
	if n, sum := e.refunded(); n != 1 || sum != 700 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 700", n, sum)
	}
}

// Two staff members refund the same $19.00 order at once, $15.00 each, ten
// keys apiece, on one instance and then spread over two, through the API
// and through the console's Refund form: Σ of the provider's succeeded
// refunds never exceeds the charge — exactly one refund of $15.00 went
// through, and the order says so.
func TestTwoStaffRefundTheSameOrderAtOnce(t *testing.T) {
	for _, via := range []string{"the API", "the console"} {
		for _, instances := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s, %d instances", via, instances), func(t *testing.T) {
				e := newEnv(t)
				owner, orderID := e.shopperOrder("shopper@example.com")
				alice, aliceID := e.staffToken("alice@example.com")
				bob, bobID := e.staffToken("bob@example.com")
				urls := []string{e.url}
				if instances == 2 {
					other := httptest.NewServer(newServer(t, e.deps))
					t.Cleanup(other.Close)
					urls = append(urls, other.URL)
				}
				var browsers []*shopper
				for i, email := range []string{"alice@example.com", "bob@example.com"} {
					b := e.shopperAt(urls[i%len(urls)], http.DefaultTransport)
					must(t, b.logIn(email))
					browsers = append(browsers, b)
				}
				created := map[int]response{}
				ok := map[string]int{"the API": http.StatusCreated, "the console": http.StatusSeeOther}[via]
				answers := make([]response, 20)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range answers {
					wg.Go(func() {
						at := *e
						at.url = urls[i%len(urls)]
						token := []string{alice, bob}[i%2]
						<-start
						var r response
						var err error
						if via == "the console" {
							form := url.Values{"idempotency_key": {fmt.Sprintf("r%d", i)}, "amount": {"15.00"}, "reason": {"at once"}}
							r, err = browsers[i%2].send(http.MethodPost, "/staff/orders/"+orderID+"/refunds", form, nil)
						} else {
							r, err = at.send(e.refundRequest(token, orderID, fmt.Sprintf("r%d", i), `{"amount_cents":1500}`))
						}
						if err != nil {
							t.Error(err)
						}
						answers[i] = r
					})
				}
				close(start)
				wg.Wait()
				for i, r := range answers {
					switch {
					case r.Status == ok:
						created[i] = r
					case r.Status != http.StatusConflict:
						t.Fatalf("a refund answered %d %s", r.Status, r.Body)
					}
				}
				if n, sum := e.refunded(); len(created) != 1 || n != 1 || sum != 1500 {
					t.Fatalf("%d answered %d; the provider refunded %d times, %d cents; want 1, 1, 1500 (of a 1900 charge)", len(created), ok, n, sum)
				}
				var refund models.Refund
				must(t, e.db.Take(&refund, "state = ?", models.Succeeded).Error)
				if by := refund.CreatedBy; by == nil || (*by != aliceID && *by != bobID) {
					t.Fatalf("the refund was created by %v, want one of the staff", by)
				}
				if o := e.orderJSON(owner, orderID); o["refunded_cents"] != 1500.0 {
					t.Fatalf("the order: %v", o)
				}
			})
		}
	}
}
