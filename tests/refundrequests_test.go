package tests

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

func (e *env) refundRequestRequest(token, orderID, k, body string) request {
	return request{method: "POST", path: "/api/v1/orders/" + orderID + "/refund-requests", token: token, key: key(k), body: body}
}

// A double-clicked "Request a refund" records one request; the order page
// then lists it, waiting, and offers the form no more. A staff refund of the
// order fulfils it, and the shopper's page shows the refund.
func TestARefundRequestDoubleClickedRecordsOne(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	form := url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}, "reason": {"Arrived broken"}}
	answers := s.postTogether(2, orderPath+"/refund-requests", form)
	for _, r := range answers {
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
			t.Fatalf("double-click: %d %q %s", r.Status, r.Header.Get("Location"), r.Body)
		}
	}
	if answers[0].replayed() == answers[1].replayed() {
		t.Fatal("want one click run and the other replayed")
	}
	if n := e.count("refund_requests"); n != 1 {
		t.Fatalf("%d requests recorded, want 1", n)
	}
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, "You asked for a refund (Arrived broken): the shop&#39;s staff will answer it.")
	if strings.Contains(string(page.Body), `action="`+orderPath+`/refund-requests"`) {
		t.Fatal("the order page offers another request while one is open")
	}
	if shop, provider := e.refunds(); shop != 0 || provider != 0 {
		t.Fatalf("a request refunded: %d refunds, %d at the provider", shop, provider)
	}

	staff, _ := e.staffToken("staff@example.com")
	e.staffRefund(staff, orderPath, "give-it", `{}`)
	var req models.RefundRequest
	if err := e.db.Take(&req).Error; err != nil || req.State != models.RequestFulfilled || req.RefundID == nil {
		t.Fatalf("the request after the staff refund: %+v (%v), want fulfilled by the refund", req, err)
	}
	page = s.get(orderPath)
	body := html.UnescapeString(string(page.Body))
	isPage(t, page, http.StatusOK, "Refunded</span>", "refunded to the Test Visa card.")
	if !strings.Contains(body, "You asked for a refund (Arrived broken): refunded.") {
		t.Fatalf("the order page does not tell the request fulfilled: %s", body)
	}
	if shop, provider := e.refunds(); shop != 1 || provider != 1 {
		t.Fatalf("%d refunds, %d at the provider; want 1 and 1", shop, provider)
	}
}

// POST /api/v1/orders/{id}/refund-requests: 201 requested, replayed for
// its key; another key while it is open is 409 and records nothing; an
// unpaid order is 409 order-not-paid, another shopper's order 404; a staff
// refund fulfils it.
func TestAPIRefundRequests(t *testing.T) {
	e := newEnv(t)
	shopper, orderID := e.shopperOrder("shopper@example.com")
	other := e.signUp("other@example.com")
	unpaid := e.createOrder(shopper, "unpaid", orderBody(e.productPriced(1900), 1))
	ask := e.refundRequestRequest(shopper, orderID, "ask", `{"reason":"too small"}`)
	first := e.do(ask)
	if first.Status != http.StatusCreated || first.json(t)["state"] != "requested" || first.json(t)["reason"] != "too small" {
		t.Fatalf("request: %d %s", first.Status, first.Body)
	}
	if again := e.do(ask); !again.replayed() || again.Status != http.StatusCreated || again.json(t)["id"] != first.json(t)["id"] {
		t.Fatalf("the retry: %d %s", again.Status, again.Body)
	}
	isProblem(t, e.do(e.refundRequestRequest(shopper, orderID, "ask-again", `{}`)), http.StatusConflict, "/problems/conflict")
	isProblem(t, e.do(e.refundRequestRequest(shopper, unpaid, "ask-unpaid", `{}`)), http.StatusConflict, "/problems/order-not-paid")
	isProblem(t, e.do(e.refundRequestRequest(other, orderID, "ask-other", `{}`)), http.StatusNotFound, "/problems/not-found")
	if n := e.count("refund_requests"); n != 1 {
		t.Fatalf("%d requests recorded, want 1", n)
	}
	staff, _ := e.staffToken("staff@example.com")
	r := e.do(e.refundRequest(staff, orderID, "give", `{}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("staff refund: %d %s", r.Status, r.Body)
	}
	if n := e.count("refund_requests", "state = ? AND refund_id = ?", models.RequestFulfilled, r.json(t)["id"]); n != 1 {
		t.Fatalf("%d requests fulfilled by the refund, want 1", n)
	}
}
