package tests

import (
	"net/http"
	"sync"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

func (e *env) cancelRequest(token, orderID, k, body string) request {
	return request{method: "POST", path: "/api/v1/orders/" + orderID + "/cancel", token: token, key: key(k), body: body}
}

// A pending order is cancelled (an empty body or {}), and replayed for its
// key; paying it is then 409 order-cancelled, and charges nothing. A paid
// order cannot be cancelled: refund it instead.
func TestCancelAPendingOrder(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("cancel@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	r := e.do(e.cancelRequest(token, orderID, "c1", `{}`))
	if r.Status != http.StatusOK || r.json(t)["status"] != models.OrderCancelled {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if again := e.do(e.cancelRequest(token, orderID, "c1", `{}`)); again.Status != http.StatusOK || !again.replayed() {
		t.Fatalf("the same key again: %d replayed=%v", again.Status, again.replayed())
	}
	isProblem(t, e.do(e.payRequest(token, orderID, "p1", payments.MethodVisa)), http.StatusConflict, "/problems/order-cancelled")
	if n := e.charges(); n != 0 {
		t.Fatalf("%d charges for a cancelled order", n)
	}
	other := e.createOrder(token, "other", orderBody(e.products()[0], 1))
	if r := e.do(e.cancelRequest(token, other, "c2", "")); r.Status != http.StatusOK {
		t.Fatalf("cancel with no body: %d %s", r.Status, r.Body)
	}
	_, paid := e.paidOrder("cancel-paid@example.com", payments.MethodVisa)
	paidToken := e.signUpAgain("cancel-paid@example.com")
	isProblem(t, e.do(e.cancelRequest(paidToken, paid, "c3", `{}`)), http.StatusConflict, "/problems/order-already-paid")
	wantEventPerFact(t, e.db, outbox.OrderCancelled, 2)
}

// An order with a payment attempt in doubt cannot be cancelled yet: 409
// payment-in-progress with Retry-After, and the order stays pending, its
// units still its own: a charge may land.
func TestCancelWaitsForAPaymentInDoubt(t *testing.T) {
	e, orderID, _ := inDoubt(t)
	token := e.signUpAgain("webhook@example.com")
	var line models.OrderItem
	if err := e.db.Take(&line, "order_id = ?", orderID).Error; err != nil {
		t.Fatal(err)
	}
	left := unitsLeft(t, e.db, line.ProductID)
	r := e.do(e.cancelRequest(token, orderID, "c1", `{}`))
	isProblem(t, r, http.StatusConflict, "/problems/payment-in-progress")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if n := e.count("orders", "id = ? AND status = ?", orderID, models.OrderPending); n != 1 {
		t.Fatal("the order is no longer pending")
	}
	if now := unitsLeft(t, e.db, line.ProductID); now != left {
		t.Fatalf("%d units in stock after the refused cancel, want %d: nothing given back", now, left)
	}
}

// Cancel and pay race on the same order, many times: each order ends paid
// and not cancelled, with one charge, or cancelled with none — never both.
func TestCancelAndPayRace(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("race@example.com")
	for i := range 10 {
		orderID := e.createOrder(token, "order-"+string(rune('a'+i)), orderBody(e.products()[0], 1))
		var pay, cancel response
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; pay, _ = e.send(e.payRequest(token, orderID, "p-"+orderID, payments.MethodVisa)) })
		wg.Go(func() { <-start; cancel, _ = e.send(e.cancelRequest(token, orderID, "c-"+orderID, `{}`)) })
		close(start)
		wg.Wait()
		var order models.Order
		if err := e.db.Take(&order, "id = ?", orderID).Error; err != nil {
			t.Fatal(err)
		}
		charges := e.count("payments", "order_id = ? AND status = ?", orderID, models.Succeeded)
		switch {
		case order.Status == models.OrderPaid && charges == 1 && pay.Status == http.StatusCreated && cancel.Status == http.StatusConflict:
		case order.Status == models.OrderCancelled && charges == 0 && cancel.Status == http.StatusOK && pay.Status == http.StatusConflict:
		default:
			t.Fatalf("order %s: %s with %d charges; pay %d, cancel %d", orderID, order.Status, charges, pay.Status, cancel.Status)
		}
	}
	if n := e.charges(); n != e.count("orders", "status = ?", models.OrderPaid) {
		t.Fatalf("%d charges at the provider for %d paid orders", n, e.count("orders", "status = ?", models.OrderPaid))
	}
}
