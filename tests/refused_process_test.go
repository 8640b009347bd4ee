package tests

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// refusedSettings: the reproduction. The simulated provider refuses
// pm_card_unavailable halfway through its 4 s round trip, before charging.
func refusedSettings(databaseURL, reconcileEvery string) []string {
	return []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=2s", "IDEMPOTENCY_WAIT=300ms",
		"PAYMENT_LATENCY=4s", "PAYMENT_RECONCILE_EVERY=" + reconcileEvery}
}

// payRefused starts a payment the provider will refuse, through the server
// at e.url, and returns once its attempt is recorded in doubt: the provider
// is being called, and has not answered yet.
func (e *env) payRefused(token, orderID string) <-chan answerOf {
	e.t.Helper()
	answered := e.async(e.payRequest(token, orderID, "refused", payments.MethodUnavailable))
	until(e.t, "the refused attempt is recorded in doubt", func() bool {
		return e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.InDoubt) == 1
	})
	return answered
}

// paysOnceWithANewKey: a new key pays the order, once, after the refused
// attempt is settled as failed.
func (e *env) paysOnceWithANewKey(base func() string, token, orderID string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	r, err := untilFinal(ctx, base, e.payRequest(token, orderID, "new-key", payments.MethodVisa))
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Status != http.StatusCreated {
		e.t.Fatalf("a new key after the refused attempt: %d %s; want 201", r.Status, r.Body)
	}
	e.paidOnce("after the refused attempt", orderID)
	if n := e.count("payment_attempts", "order_id = ? AND state = ? AND payment_method = ?", orderID, models.Failed, payments.MethodUnavailable); n != 1 {
		e.t.Fatalf("%d refused attempts settled as failed, want 1", n)
	}
}

// A refused attempt whose server is killed mid-call: only the dead run
// could have recorded the refusal. The restarted server's reconciler sends
// the attempt's request again, gets the provider's definitive refusal,
// settles the attempt as failed, and the order is payable again: a new key
// pays it exactly once.
func TestRefusedAttemptKilledMidCallDoesNotBlockItsOrder(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := refusedSettings(databaseURL, "2s")
	first := startShop(t, "server that dies", settings...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.url}
	token := e.signUp("refused-kill@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	answered := e.payRefused(token, orderID)
	first.kill()
	if r := <-answered; r.err == nil {
		t.Fatalf("the payment was answered before the kill: %d %s", r.Status, r.Body)
	}
	restarted := startShop(t, "restarted server", settings...)
	e.url = restarted.url
	until(t, "the reconciler to settle the refused attempt", func() bool {
		return e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.Failed) == 1
	})
	if n := e.charges(); n != 0 {
		t.Fatalf("%d charges for a refused attempt", n)
	}
	e.paysOnceWithANewKey(func() string { return restarted.url }, token, orderID)
}

// A refused attempt whose server loses its database when the refusal comes:
// the run cannot record it. Once the database is back, a new key's payment
// resolves the attempt itself — sends its request again, gets the definitive
// refusal, settles it as failed — and pays the order exactly once. The
// reconciler is off, so the new key's request is what settles it.
//
// On PostgreSQL the link is cut for 5 s. On SQLite the database is a file
// with no link to cut; the test holds its write lock instead, for longer
// than the server's busy timeout, so that the server's writes fail the same.
func TestRefusedAttemptWithTheDatabaseCutDoesNotBlockItsOrder(t *testing.T) {
	databaseURL := testkit.URL(t)
	e := &env{t: t, db: testkit.Open(t, databaseURL)}
	serverURL := databaseURL
	var link *testkit.Link
	if u, err := url.Parse(databaseURL); err == nil && strings.HasPrefix(u.Scheme, "postgres") {
		link = testkit.NewLink(t, u.Host)
		u.Host = link.Addr
		serverURL = u.String()
	}
	shop := startShop(t, "server that loses its database", refusedSettings(serverURL, "0")...)
	e.url = shop.url
	token := e.signUp("refused-cut@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	answered := e.payRefused(token, orderID)
	restored := make(chan struct{})
	if link != nil {
		link.Cut()
		time.AfterFunc(5*time.Second, func() { link.Restore(); close(restored) })
	} else {
		lock := e.db.Begin()
		if err := lock.Exec("UPDATE products SET name = name").Error; err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(sqliteBusyTimeout+5*time.Second, func() { lock.Rollback(); close(restored) })
	}
	if r := <-answered; r.err == nil && r.Status < 500 {
		t.Fatalf("the refused payment without its database: %d %s; want a failure", r.Status, r.Body)
	}
	<-restored
	if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.InDoubt); n != 1 {
		t.Fatalf("%d attempts in doubt once the database is back; want the refused one, which its run could not record", n)
	}
	e.paysOnceWithANewKey(func() string { return shop.url }, token, orderID)
}

// sqliteBusyTimeout is how long the server waits for SQLite's write lock
// (models.Open's _busy_timeout).
const sqliteBusyTimeout = 15 * time.Second
