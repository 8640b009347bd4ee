package tests

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Pins: a cancel is refused while a payment runs. Planted: CancelOrder
// (models/cancel.go) without its condition on the hold ("held_by IS NULL
// OR held_until <= now") and without its count of attempts in doubt.
// Failed: "status 200, want 409" for the cancel sent while the charge was
// at the provider. Either guard alone refuses this cancel today, since a
// payment writes its hold and its attempt in doubt in one transaction:
// TestACancelWaitsForTheOrdersHold pins the hold alone.
//
// A cancel sent while the order's charge is at the provider is refused
// (409, payment in progress): the order is not cancelled while money may
// be taken. Once the charge answers, the order is paid, not cancelled, and
// a cancel is told it is paid.
func TestACancelWhileAChargeIsInFlightIsRefused(t *testing.T) {
	atProvider := newGate()
	script, _ := withScript(t, []fate{{held: atProvider}}, nil)
	e := newEnv(t, script)
	token := e.signUp("cancel-in-flight@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))

	pay := e.async(e.payRequest(token, orderID, "k1", payments.MethodVisa))
	testkit.Recv(t, atProvider.entered, "the charge at the provider")
	isProblem(t, e.do(e.cancelRequest(token, orderID, "c1", `{}`)), http.StatusConflict, "/problems/payment-in-progress")
	if n := e.count("orders", "id = ? AND status = ? AND held_by IS NOT NULL", orderID, models.OrderPending); n != 1 {
		t.Fatal("while the charge is at the provider, the order is no longer pending under the payment's hold")
	}

	atProvider.open()
	if r := testkit.Recv(t, pay, "the payment's answer"); r.err != nil || r.Status != http.StatusCreated {
		t.Fatalf("the payment: %v %d %s; want 201", r.err, r.Status, r.Body)
	}
	e.paidOnce("after the charge", orderID)
	if n := e.count("orders", "id = ? AND status = ?", orderID, models.OrderCancelled); n != 0 {
		t.Fatal("the paid order is cancelled")
	}
	isProblem(t, e.do(e.cancelRequest(token, orderID, "c2", `{}`)), http.StatusConflict, "/problems/order-already-paid")
}

// Pins: a cancel is refused while a run holds the order, and not once the
// hold has lapsed. Planted: CancelOrder (models/cancel.go) without its
// condition on the hold ("held_by IS NULL OR held_until <= now"). Failed:
// "status 200, want 409" for the cancel under the live hold.
//
// A run holds the order and has recorded nothing in doubt yet: the hold is
// written by hand, since a payment writes its hold and its attempt in one
// transaction. A cancel is refused (409, payment in progress) while the
// hold lasts, and the order stays pending; once it has lapsed (its run
// died), the cancel's retry cancels the order.
func TestACancelWaitsForTheOrdersHold(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("cancel-held@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	if err := e.db.Exec("UPDATE orders SET held_by = ?, held_until = ? WHERE id = ?", "a-run", e.clock.Now().Add(time.Minute), orderID).Error; err != nil {
		t.Fatal(err)
	}
	cancel := e.cancelRequest(token, orderID, "c1", `{}`)
	isProblem(t, e.do(cancel), http.StatusConflict, "/problems/payment-in-progress")
	if n := e.count("orders", "id = ? AND status = ? AND held_by = ?", orderID, models.OrderPending, "a-run"); n != 1 {
		t.Fatal("a cancel under a live hold changed the order")
	}
	e.clock.Advance(time.Minute)
	if r := e.do(cancel); r.Status != http.StatusOK || r.json(t)["status"] != models.OrderCancelled {
		t.Fatalf("the cancel once the hold has lapsed: %d %s; want the order cancelled", r.Status, r.Body)
	}
}

// Pins: a payment takes the order's hold only while the order is pending.
// Planted: begin (models/requests.go; BeginPayment before the one
// protocol) taking the hold without its condition on the order's status
// (pending, for a payment). Failed on PostgreSQL: "status 201, want
// 409" (the cancelled order was charged, and marked paid); on SQLite it
// passes, as the race cannot happen there (below).
//
// A payment reads the order, pending, and before it takes the order's
// hold the order is cancelled: the payment is told the order is cancelled,
// and nothing is charged, ever. The payment is held at its first write of
// the order (the hold) until the cancel has answered. On PostgreSQL the
// cancel commits meanwhile, since the payment has only read the order. On
// SQLite every transaction takes the one write lock at its start, so the
// cancel cannot come between the payment's read and its hold: there the
// payment goes on at once, the cancel waits for it, and the order ends
// paid and not cancelled. (A payment that locked the order's row as it
// read it would close the window: the cancel would then wait for the
// payment, and fail here on the client's timeout, a sign to hold the
// payment elsewhere.)
func TestAnOrderCancelledAfterAPaymentReadItIsNeverCharged(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("cancel-race@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	interleaved := e.db.Dialector.Name() == "postgres"
	atHold, cancelled := make(chan struct{}), make(chan struct{})
	onFirstOrderUpdate(t, e.db, func() {
		close(atHold)
		if interleaved {
			select {
			case <-cancelled:
			case <-t.Context().Done():
			}
		}
	})

	pay := e.async(e.payRequest(token, orderID, "k1", payments.MethodVisa))
	select {
	case <-atHold:
	case r := <-pay:
		t.Fatalf("the payment answered %d %s without writing its order's hold", r.Status, r.Body)
	}
	cancel := e.do(e.cancelRequest(token, orderID, "c1", `{}`))
	close(cancelled)
	paid := testkit.Recv(t, pay, "the payment's answer")
	if paid.err != nil {
		t.Fatal(paid.err)
	}
	if !interleaved {
		if paid.Status != http.StatusCreated || cancel.Status != http.StatusConflict {
			t.Fatalf("pay %d, cancel %d %s; want the payment first, then the cancel refused", paid.Status, cancel.Status, cancel.Body)
		}
		e.paidOnce("after the payment and the cancel", orderID)
		return
	}
	if cancel.Status != http.StatusOK {
		t.Fatalf("the cancel: %d %s; want 200", cancel.Status, cancel.Body)
	}
	isProblem(t, paid.response, http.StatusConflict, "/problems/order-cancelled")
	if calls, attempts := e.provider.Calls(), e.count("payment_attempts", "order_id = ?", orderID); calls != 0 || attempts != 0 || e.charges() != 0 {
		t.Fatalf("%d provider calls, %d attempts, %d charges for an order cancelled before its hold; want none", calls, attempts, e.charges())
	}
	if n := e.count("orders", "id = ? AND status = ? AND held_by IS NULL", orderID, models.OrderCancelled); n != 1 {
		t.Fatal("the order is not cancelled and free")
	}
}

// onFirstOrderUpdate runs fn in the first update of the orders table made
// from now on, before it is sent: a payment's first write of its order is
// its hold. Later updates go on without waiting for fn.
func onFirstOrderUpdate(t *testing.T, db *gorm.DB, fn func()) {
	var fired atomic.Bool
	err := db.Callback().Update().Before("gorm:update").Register("pins:first-order-update", func(tx *gorm.DB) {
		if tx.Statement.Table == "orders" && fired.CompareAndSwap(false, true) {
			fn()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
