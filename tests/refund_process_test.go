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

// crashMidRefund runs the server as a process, pays an order, asks for a
// refund of all of it, and kills the server with SIGKILL once the provider
// has refunded and before the refund is committed — as crashMidPayment does
// for a charge (on PostgreSQL the test holds the order's row, so the kill
// lands there whatever the timing; on SQLite it lands while the provider's
// reply travels back).
func crashMidRefund(t *testing.T, databaseURL string, settings []string) (*env, string, string, request) {
	t.Helper()
	first := startShop(t, "server that dies", settings...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.url}
	token, orderID := e.paidOrder("crash-refund@example.com", payments.MethodVisa)
	refund := e.refundRequest(token, orderID, "r1", `{}`)
	answered := e.async(refund)
	until(t, "the refund is recorded in doubt", func() bool {
		return e.count("refunds", "order_id = ? AND state = ?", orderID, models.InDoubt) == 1
	})
	if database.IsPostgres(e.db) {
		lock := e.db.Begin()
		defer lock.Rollback()
		if err := lock.Exec("SELECT id FROM orders WHERE id = ? FOR UPDATE", orderID).Error; err != nil {
			t.Fatal(err)
		}
	}
	until(t, "the provider to refund", func() bool { return e.count("simulated_refunds") == 1 })
	first.kill()
	if r := <-answered; r.err == nil {
		t.Fatalf("the refund was answered before the kill: %d %s", r.Status, r.Body)
	}
	if n := e.count("refunds", "state = ?", models.InDoubt); n != 1 {
		t.Fatalf("%d refunds in doubt after the kill, want 1: the kill did not land before the commit", n)
	}
	return e, token, orderID, refund
}

// kill -9 between the provider's refund and our commit: the retry with the
// same key gets its 201; a new key then finds nothing left to refund; the
// provider refunded once.
func TestKill9MidRefundThenTheRetryGetsItsRefund(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=2s", "IDEMPOTENCY_WAIT=300ms", "PAYMENT_LATENCY=3s", "PAYMENT_RECONCILE_EVERY=0"}
	e, token, orderID, first := crashMidRefund(t, databaseURL, settings)
	restarted := startShop(t, "restarted server", settings...)
	e.url = restarted.url
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	server := func() string { return restarted.url }
	retry, err := untilFinal(ctx, server, first)
	if err != nil {
		t.Fatal(err)
	}
	if retry.Status != http.StatusCreated || retry.json(t)["amount_cents"] != 1900.0 {
		t.Fatalf("the first key's retry: %d %s; want 201 with its refund", retry.Status, retry.Body)
	}
	other, err := untilFinal(ctx, server, e.refundRequest(token, orderID, "r2", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	isProblem(t, other, http.StatusConflict, "/problems/refund-exceeds-refundable")
	if n, sum := e.refunded(); n != 1 || sum != 1900 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 1900", n, sum)
	}
	if n := e.count("orders", "id = ? AND status = ? AND refunded_cents = ?", orderID, models.OrderRefunded, 1900); n != 1 {
		t.Fatal("the order is not refunded")
	}
}

// The same crash, and nobody retries: the restarted server's reconciler
// records the refund.
func TestKill9MidRefundIsReconciledWithoutARetry(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=1s", "PAYMENT_LATENCY=3s", "PAYMENT_RECONCILE_EVERY=200ms"}
	e, _, orderID, _ := crashMidRefund(t, databaseURL, settings)
	startShop(t, "restarted server", settings...)
	until(t, "the reconciler to record the refund", func() bool {
		return e.count("orders", "id = ? AND status = ?", orderID, models.OrderRefunded) == 1
	})
	if n, sum := e.refunded(); n != 1 || sum != 1900 || e.count("refunds", "state = ?", models.Succeeded) != 1 {
		t.Fatalf("the provider refunded %d times, %d cents; want one refund, recorded", n, sum)
	}
}
