package tests

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shop/shop/payments"
)

// Refunds and cancellation in the browser: the order page tells the
// refunds staff give (it has no Refund form), and its Cancel order button
// has its own one-time key, so that a double-click cancels once.

// keyOfForm is the hidden key of the page's form that posts to action.
func keyOfForm(t *testing.T, page response, action string) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<form method="post" action="` + regexp.QuoteMeta(action) + `"[^>]*>\s*<input type="hidden" name="idempotency_key" value="([^"]+)">`)
	m := re.FindSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no form posting to %s on the page (%d): %s", action, page.Status, page.Body)
	}
	return string(m[1])
}

// paidOrder is a shopper's order, paid with method, and its page's path.
func paidOrder(t *testing.T, s *shopper, productID, method string) string {
	t.Helper()
	orderPath := s.placeOrder(s.checkout(productID, 2))
	if r := s.post(orderPath+"/payments", s.payForm(orderPath, method)); r.Status != http.StatusSeeOther {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	return orderPath
}

func (e *env) refunds() (shop, provider int64) {
	return e.count("refunds", "state IN ?", []string{"succeeded", "pending"}), e.count("simulated_refunds", "status = ?", "succeeded")
}

// staffRefund refunds the order of the page orderPath through the API, as
// a staff user does, and fails the test unless it is 201.
func (e *env) staffRefund(staff, orderPath, k, body string) {
	e.t.Helper()
	if r := e.do(e.refundRequest(staff, strings.TrimPrefix(orderPath, "/orders/"), k, body)); r.Status != http.StatusCreated {
		e.t.Fatalf("staff refund: %d %s", r.Status, r.Body)
	}
}

// The shopper's order page has no Refund form, and the shop's forms take
// no refund (404, nothing written); it tells the refunds staff give: a
// partial one, then the rest with its reason, and the receipt lists them.
func TestWebOrderPageShowsStaffRefundsAndNoRefundForm(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, "Paid</span>")
	if strings.Contains(string(page.Body), orderPath+`/refunds"`) {
		t.Fatal("the shopper's order page offers a Refund form")
	}
	keys := e.count("idempotency_keys")
	isPage(t, s.post(orderPath+"/refunds", url.Values{"idempotency_key": {"refund-by-form"}}), http.StatusNotFound)
	if shop, provider := e.refunds(); shop != 0 || provider != 0 || e.count("refunds") != 0 || e.count("idempotency_keys") != keys {
		t.Fatalf("the refused form wrote %d refunds (%d at the provider), %d keys", shop, provider, e.count("idempotency_keys")-keys)
	}

	staff, _ := e.staffToken("staff@example.com")
	e.staffRefund(staff, orderPath, "part", `{"amount_cents":150}`)
	page = s.get(orderPath)
	isPage(t, page, http.StatusOK, "Partly refunded", "$1.50 refunded to the Test Visa card.")
	hasNotice(t, page, "status", "Refunded $1.50 to your Test Visa card.")
	e.staffRefund(staff, orderPath, "rest", `{"reason":"Changed my mind"}`)
	page = s.get(orderPath)
	isPage(t, page, http.StatusOK, "Refunded</span>", "refunded to the Test Visa card. Reason: Changed my mind")
	if shop, provider := e.refunds(); shop != 2 || provider != 2 {
		t.Fatalf("%d refunds, %d at the provider; want 2 and 2", shop, provider)
	}
	isPage(t, s.get(orderPath+"/receipt"), http.StatusOK, "refunded to the Test Visa card.")
}

func TestWebCancelPendingOrder(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	key := keyOfForm(t, s.get(orderPath), orderPath+"/cancel")
	for i := range 2 {
		r := s.post(orderPath+"/cancel", url.Values{"idempotency_key": {key}})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath || r.replayed() != (i > 0) {
			t.Fatalf("cancel %d: %d %q replayed=%v %s", i, r.Status, r.Header.Get("Location"), r.replayed(), r.Body)
		}
	}
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, "Cancelled</span>")
	hasNotice(t, page, "status", "You cancelled this order. Nothing was charged. You can place a new order from the catalog. Sent twice, done once: you sent the cancel form more than once; it was cancelled once.")
	for _, form := range []string{"/payments", "/cancel", "/refunds"} {
		if strings.Contains(string(page.Body), `action="`+orderPath+form+`"`) {
			t.Fatalf("a cancelled order still offers %s", form)
		}
	}
	if e.count("orders", "status = ?", "cancelled") != 1 || e.charges() != 0 {
		t.Fatalf("%d cancelled orders, %d charges; want 1 and 0", e.count("orders", "status = ?", "cancelled"), e.charges())
	}
}

func TestWebCancelOfAPaidOrderIsRefused(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	key := keyOfForm(t, s.get(orderPath), orderPath+"/cancel")
	if r := s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa)); r.Status != http.StatusSeeOther {
		t.Fatalf("pay: %d", r.Status)
	}
	page := s.post(orderPath+"/cancel", url.Values{"idempotency_key": {key}}) // from a tab opened before paying
	isPage(t, page, http.StatusConflict)
	hasNotice(t, page, "alert", "This order is paid, so it cannot be cancelled. Refunds are given by the shop's staff: contact us.")
	if e.count("orders", "status = ?", "paid") != 1 || e.charges() != 1 {
		t.Fatal("the refused cancel changed the order")
	}
}

func TestActivityTellsCancellations(t *testing.T) {
	_, ids, s := signedIn(t)
	pending := s.placeOrder(s.checkout(ids[0], 1))
	s.post(pending+"/cancel", url.Values{"idempotency_key": {keyOfForm(t, s.get(pending), pending+"/cancel")}})
	isPage(t, s.get("/account"), http.StatusOK, `<a href="`+pending+`">Cancelled order #1001</a> — nothing was charged.`)
}
