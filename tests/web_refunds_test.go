package tests

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shop/shop/payments"
)

// Refunds and cancellation in the browser: the order page's Refund form and
// Cancel order button, each with its own one-time key, so that a
// double-click or a resubmission gives money back once.

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

func (s *shopper) refundForm(orderPath, amount, reason string) url.Values {
	s.t.Helper()
	key := keyOfForm(s.t, s.get(orderPath), orderPath+"/refunds")
	return url.Values{"idempotency_key": {key}, "amount": {amount}, "reason": {reason}}
}

func (e *env) refunds() (shop, provider int64) {
	return e.count("refunds", "state IN ?", []string{"succeeded", "pending"}), e.count("simulated_refunds", "status = ?", "succeeded")
}

func TestWebRefundResubmittedRefundsOnce(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	isPage(t, s.get(orderPath), http.StatusOK, `action="`+orderPath+`/refunds"`, "Leave the amount empty to refund everything")

	form := s.refundForm(orderPath, "", "Changed my mind")
	for i := range 3 { // the click, then the back button and a refresh
		r := s.post(orderPath+"/refunds", form)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath || r.replayed() != (i > 0) {
			t.Fatalf("submission %d: %d %q replayed=%v %s", i, r.Status, r.Header.Get("Location"), r.replayed(), r.Body)
		}
	}
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, "Refunded</span>", "refunded to the Test Visa card. Reason: Changed my mind")
	hasNotice(t, page, "status", "Refunded $70.00 to your Test Visa card. It can take a few days to show on your statement. Sent twice, done once: you sent the refund form more than once; it was refunded once.")
	if strings.Contains(string(page.Body), orderPath+`/refunds"`) {
		t.Fatal("a fully refunded order still offers the Refund form")
	}
	if shop, provider := e.refunds(); shop != 1 || provider != 1 {
		t.Fatalf("%d refunds, %d at the provider; want 1 and 1", shop, provider)
	}
	isPage(t, s.get(orderPath+"/receipt"), http.StatusOK, "refunded to the Test Visa card.")
}

func TestWebDoubleClickedRefundRefundsOnce(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	answers := s.postTogether(2, orderPath+"/refunds", s.refundForm(orderPath, "", ""))
	for _, r := range answers {
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
			t.Fatalf("double-click: %d %q %s", r.Status, r.Header.Get("Location"), r.Body)
		}
	}
	if answers[0].replayed() == answers[1].replayed() {
		t.Fatal("want one click run and the other replayed")
	}
	if shop, provider := e.refunds(); shop != 1 || provider != 1 {
		t.Fatalf("%d refunds, %d at the provider; want 1 and 1", shop, provider)
	}
}

func TestWebPartialRefundsAndRefusedAmounts(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)

	for _, c := range []struct {
		amount string
		status int
		says   string
	}{
		{"twelve", http.StatusUnprocessableEntity, "Enter an amount in dollars, such as 12.00."},
		{"0.00", http.StatusUnprocessableEntity, "Enter an amount greater than $0.00."},
		{"-3", http.StatusUnprocessableEntity, "Enter an amount in dollars"},
		{"99999.00", http.StatusConflict, "That is more than can still be refunded on this order; nothing was refunded."},
	} {
		form := s.refundForm(orderPath, c.amount, "")
		page := s.post(orderPath+"/refunds", form)
		isPage(t, page, c.status, `aria-invalid="true"`, `value="`+c.amount+`"`)
		hasNotice(t, page, "alert", c.says)
		if shop, provider := e.refunds(); shop != 0 || provider != 0 || e.count("refunds") != 0 {
			t.Fatalf("%q: %d refunds, %d at the provider, %d rows; want none", c.amount, shop, provider, e.count("refunds"))
		}
	}

	r := s.post(orderPath+"/refunds", s.refundForm(orderPath, "1.50", ""))
	if r.Status != http.StatusSeeOther {
		t.Fatalf("partial refund: %d %s", r.Status, r.Body)
	}
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, "Partly refunded", "$1.50 refunded to the Test Visa card.", `action="`+orderPath+`/refunds"`)
	hasNotice(t, page, "status", "Refunded $1.50 to your Test Visa card.")
	if r := s.post(orderPath+"/refunds", s.refundForm(orderPath, "", "")); r.Status != http.StatusSeeOther {
		t.Fatalf("the rest: %d %s", r.Status, r.Body)
	}
	isPage(t, s.get(orderPath), http.StatusOK, "Refunded</span>")
	if shop, provider := e.refunds(); shop != 2 || provider != 2 {
		t.Fatalf("%d refunds, %d at the provider; want 2 and 2", shop, provider)
	}
}

func TestWebFailedRefundIsToldAndGivesNothingBack(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodRefundFail)
	r := s.post(orderPath+"/refunds", s.refundForm(orderPath, "", ""))
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
		t.Fatalf("refund: %d %q %s", r.Status, r.Header.Get("Location"), r.Body)
	}
	page := s.get(orderPath)
	hasNotice(t, page, "alert", "The refund could not be sent to your card. The card provider refused it (the card's account may be closed), so nothing was given back.")
	isPage(t, page, http.StatusOK, "Paid</span>", `action="`+orderPath+`/refunds"`)
	if shop, provider := e.refunds(); shop != 0 || provider != 0 {
		t.Fatalf("%d refunds, %d at the provider; want none", shop, provider)
	}
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
	hasNotice(t, page, "alert", "This order is paid, so it cannot be cancelled: refund it instead.")
	if e.count("orders", "status = ?", "paid") != 1 || e.charges() != 1 {
		t.Fatal("the refused cancel changed the order")
	}
}

func TestActivityTellsRefundsAndCancellations(t *testing.T) {
	_, ids, s := signedIn(t)
	paid := paidOrder(t, s, ids[0], payments.MethodVisa) // order #1001
	refund := s.refundForm(paid, "1.50", "")
	s.post(paid+"/refunds", refund)
	s.post(paid+"/refunds", refund) // sent twice
	failing := paidOrder(t, s, ids[0], payments.MethodRefundFail)
	s.post(failing+"/refunds", s.refundForm(failing, "", ""))
	pending := s.placeOrder(s.checkout(ids[0], 1))
	s.post(pending+"/cancel", url.Values{"idempotency_key": {keyOfForm(t, s.get(pending), pending+"/cancel")}})

	isPage(t, s.get("/account"), http.StatusOK,
		`<a href="`+paid+`">Refunded $1.50 on order #1001</a> — done (you sent it twice; it happened once).`,
		`<a href="`+failing+`">Asked for a refund of $70.00 on order #1002</a> — the card provider refused it, so nothing was given back.`,
		`Cancelled an order — nothing was charged.`)
}
