package tests

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// crashMidPayment runs the server as a process, pays an order with key k1,
// and kills it with SIGKILL once the provider has charged and before the
// payment is committed: Repro A. On PostgreSQL the payment's commit waits
// for the order's row, which the test holds locked, so the kill lands there
// whatever the timing. On SQLite such a lock would hold up the provider's
// ledger too; the kill lands while the provider's reply travels back (the
// second half of PAYMENT_LATENCY, 1.5 s here), and the test checks that it
// did. It returns the database and the payment request.
func crashMidPayment(t *testing.T, databaseURL string, settings []string) (*env, string, request) {
	t.Helper()
	first := startShop(t, "server that dies", settings...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.url}
	token := e.signUp("crash-process@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 2))
	pay := e.payRequest(token, orderID, "k1", payments.MethodVisa)
	answered := e.async(pay)
	until(t, "the attempt is recorded in doubt", func() bool {
		return e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.InDoubt) == 1
	})
	if database.IsPostgres(e.db) {
		lock := e.db.Begin()
		defer lock.Rollback()
		if err := lock.Exec("SELECT id FROM orders WHERE id = ? FOR UPDATE", orderID).Error; err != nil {
			t.Fatal(err)
		}
	}
	until(t, "the provider to charge", func() bool { return e.charges() == 1 })
	first.kill()
	if r := <-answered; r.err == nil {
		t.Fatalf("the payment was answered before the kill: %d %s", r.Status, r.Body)
	}
	if n := e.count("payments"); n != 0 {
		t.Fatalf("%d payments recorded before the kill, want 0", n)
	}
	return e, orderID, pay
}

// until polls cond, every 10 ms, for at most 30 s: for a state another
// process reaches, which the test can only watch.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Repro A with real processes: kill -9 between the charge and the commit,
// restart, then a new key. The new key is told the order is paid; the
// provider holds one succeeded charge; the first key's retry is answered
// 201 with the payment its own charge made. The reconciler is off, so the
// new key's request is what resolves the attempt.
func TestKill9MidPaymentThenANewKeyChargesOnce(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=2s", "IDEMPOTENCY_WAIT=300ms", "PAYMENT_LATENCY=3s", "PAYMENT_RECONCILE_EVERY=0"}
	e, orderID, first := crashMidPayment(t, databaseURL, settings)
	restarted := startShop(t, "restarted server", settings...)
	e.url = restarted.url
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	server := func() string { return restarted.url }

	second := first
	second.key = key("k2")
	r, err := untilFinal(ctx, server, second)
	if err != nil {
		t.Fatal(err)
	}
	isProblem(t, r, http.StatusConflict, "/problems/order-already-paid")
	e.paidOnce("after a new key", orderID)

	retry, err := untilFinal(ctx, server, first)
	if err != nil {
		t.Fatal(err)
	}
	e.answeredWithTheCharge(retry, "the first key's retry")
	e.paidOnce("after the first key's retry", orderID)
}

// A payment killed mid-charge that nobody retries: the restarted server's
// reconciler records the charge and marks the order paid.
func TestKill9MidPaymentIsReconciledWithoutARetry(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=1s", "PAYMENT_LATENCY=3s", "PAYMENT_RECONCILE_EVERY=200ms"}
	e, orderID, _ := crashMidPayment(t, databaseURL, settings)
	startShop(t, "restarted server", settings...)
	until(t, "the reconciler to pay the order", func() bool {
		return e.count("orders", "id = ? AND status = ?", orderID, models.OrderPaid) == 1
	})
	e.paidOnce("after the reconciler", orderID)
	if n := e.count("payments"); n != 1 {
		t.Fatalf("%d payment rows, want 1", n)
	}
}

// A payment waiting for the shopper to authenticate, with real processes:
// the server is killed with SIGKILL during the wait, and restarted. The
// order stays held by the attempt itself (a new key is refused while the
// authentication may still be completed); once PAYMENT_AUTH_EXPIRY has
// passed, the restarted server's reconciler settles it declined, and
// another card pays the order once.
func TestKill9DuringAuthenticationIsSettledAfterTheExpiry(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=1s", "PAYMENT_LATENCY=0s", "PAYMENT_RECONCILE_EVERY=200ms", "PAYMENT_AUTH_EXPIRY=6s"}
	first := startShop(t, "server that dies", settings...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.url}
	token := e.signUp("auth-process@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	if r := e.do(e.payRequest(token, orderID, "k1", payments.MethodAuthentication)); r.Status != http.StatusAccepted {
		t.Fatalf("pay: %d %s, want 202", r.Status, r.Body)
	}
	first.kill()
	restarted := startShop(t, "restarted server", settings...)
	e.url = restarted.url
	isProblem(t, e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)), http.StatusConflict, "/problems/payment-in-progress")
	until(t, "the reconciler to settle the expired authentication", func() bool {
		return e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.Declined) == 1
	})
	if r := e.do(e.payRequest(token, orderID, "k3", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("another card after the expiry: %d %s", r.Status, r.Body)
	}
	e.paidOnce("after the expiry", orderID)
}
