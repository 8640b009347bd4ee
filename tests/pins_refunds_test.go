package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Pins: only the run that holds the order settles its refund, and lets go
// of the hold. Planted: the settlement (settle in models/requests.go;
// SettleRefund before the one protocol) updating the order without its
// fence "held_by = holder" (and its check that one row changed).
// Failed: "the run that lost its hold settled the refund", "the order is
// held by "", want still by the reconciler, "reconciler/…"", and "the run
// that lost its hold answered <nil> 201".
//
// A refund's request is slow at the provider, its run's hold lapses, and
// the reconciler takes the order over and sends the request again. The
// first run's answer comes back while the reconciler's request is still
// at the provider: it records nothing, and the order stays the
// reconciler's, which then records the refund, once.
func TestARunThatLostItsHoldNeitherSettlesTheRefundNorFreesTheOrder(t *testing.T) {
	first, again := newGate(), newGate()
	script, _ := withScript(t, nil, []fate{{held: first}, {held: again}})
	e := newEnv(t, withLease(hourLease), script)
	token, orderID := e.paidOrder("lost-hold@example.com", payments.MethodVisa)
	refund := e.refundRequest(token, orderID, "r1", `{}`)

	slow := e.async(refund)
	testkit.Recv(t, first.entered, "the refund at the provider")
	firstRun := e.heldBy(orderID)
	// The hour's lease passes on the test's clock; the heartbeat, on real
	// time, does not tick meanwhile.
	e.clock.Advance(hourLease + time.Second)
	reconciled := make(chan error, 1)
	go func() {
		n, err := e.server.Payments().Reconcile(context.Background())
		if err == nil && n != 1 {
			err = fmt.Errorf("the reconciler resolved %d, want the refund", n)
		}
		reconciled <- err
	}()
	testkit.Recv(t, again.entered, "the reconciler's request at the provider")
	reconciler := e.heldBy(orderID)
	if firstRun == "" || reconciler == "" || reconciler == firstRun {
		t.Fatalf("held by %q while the first run was at the provider, by %q after the reconciler took over; want two runs", firstRun, reconciler)
	}

	first.open()
	late := testkit.Recv(t, slow, "the first run's answer")
	if n := e.count("refunds", "order_id = ? AND state = ?", orderID, stateInDoubt); n != 1 {
		t.Error("the run that lost its hold settled the refund")
	}
	if now := e.heldBy(orderID); now != reconciler {
		t.Errorf("the order is held by %q, want still by the reconciler, %q", now, reconciler)
	}
	if late.err != nil || late.Status == http.StatusCreated {
		t.Errorf("the run that lost its hold answered %v %d %s; want no refund", late.err, late.Status, late.Body)
	}
	if t.Failed() {
		t.FailNow()
	}

	again.open()
	if err := testkit.Recv(t, reconciled, "the reconciler"); err != nil {
		t.Fatal(err)
	}
	if o := e.orderJSON(token, orderID); o["status"] != models.OrderRefunded || o["refunded_cents"] != 1900.0 {
		t.Fatalf("the order: %v", o)
	}
	if n, sum := e.refunded(); n != 1 || sum != 1900 || e.heldBy(orderID) != "" {
		t.Fatalf("the provider refunded %d times, %d cents, the order held by %q; want once, 1900, free", n, sum, e.heldBy(orderID))
	}
	if r := e.do(refund); r.Status != http.StatusCreated {
		t.Fatalf("the first key's retry: %d %s; want its refund", r.Status, r.Body)
	}
}

// heldBy is the run that holds the order; empty when none does.
func (e *env) heldBy(orderID string) string {
	e.t.Helper()
	var held sql.NullString
	if err := e.db.Raw("SELECT held_by FROM orders WHERE id = ?", orderID).Row().Scan(&held); err != nil {
		e.t.Fatal(err)
	}
	return held.String
}

// Pins: a refund in doubt counts as given back. Planted: givingBack
// (models/refunds.go) without the state in doubt, together with begin
// (models/requests.go; BeginRefund before the one protocol) not handing
// back the refund in doubt to resolve first. Failed: "the
// provider was asked to refund 3800 cents under 2 keys of a 1900-cent
// charge". Either one alone keeps the refund from being sent today: the
// amount refundable is computed only once no refund of the order is in
// doubt, so givingBack's RefundInDoubt can be seen by no test on its own.
//
// A full refund is in doubt. A refund with another key for all that is
// left, and one for a part, are never sent while it is: the provider is
// asked, over all keys, never more than the charge. Once the first refund
// is resolved as made, nothing is left to refund. (The first refund's
// request is lost, and so are those that re-send it while it is in doubt.)
func TestARefundInDoubtIsNeverRefundedOver(t *testing.T) {
	script, provider := withScript(t, nil, []fate{{lost: true}, {lost: true}, {lost: true}})
	e := newEnv(t, script)
	token, orderID := e.paidOrder("refund-in-doubt@example.com", payments.MethodVisa)
	isProblem(t, e.do(e.refundRequest(token, orderID, "r1", `{}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")

	for i, body := range []string{`{}`, `{"amount_cents":100}`} {
		if r := e.do(e.refundRequest(token, orderID, "r2-"+string(rune('a'+i)), body)); r.Status == http.StatusCreated {
			t.Fatalf("a refund of %s while the full refund is in doubt: %d %s", body, r.Status, r.Body)
		}
		if asked, keys := provider.refundsAsked(); asked > 1900 {
			t.Fatalf("the provider was asked to refund %d cents under %d keys of a 1900-cent charge", asked, keys)
		}
	}
	if n := e.count("refunds", "order_id = ? AND state IN ?", orderID, []string{stateInDoubt, stateSucceeded, statePending}); n != 1 {
		t.Fatalf("%d refunds in doubt or given back, want the first only", n)
	}

	provider.answering()
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want the refund resolved", n, err)
	}
	isProblem(t, e.do(e.refundRequest(token, orderID, "r3", `{"amount_cents":100}`)), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if n, sum := e.refunded(); n != 1 || sum != 1900 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 1900", n, sum)
	}
	if asked, keys := provider.refundsAsked(); asked != 1900 || keys != 1 {
		t.Fatalf("the provider was asked %d cents under %d keys; want 1900 under the first", asked, keys)
	}
}
