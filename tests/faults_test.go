package tests

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/handlers"
	"github.com/shop/shop/payments"
)

// A process that dies after the provider charged and before the payment was
// committed leaves the key in progress under its lease, and the charge at
// the provider. Until the lease passes a retry is told to wait; after it,
// the retry takes the key over, re-runs with the same derived key, gets the
// provider's first charge back, and pays the order: one charge, one payment.
//
// The crash is the AfterCharge fault blocking the first attempt's goroutine,
// so the database is left exactly as a dead process leaves it. The lease is
// long (an hour, on the test clock) so that the frozen attempt's heartbeat
// does not tick while the test runs, as a dead process's would not. Let go
// at the end, the attempt is fenced: it commits nothing and answers 409.
func TestCrashAfterChargeIsTakenOver(t *testing.T) {
	crashed, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	faults := &handlers.Faults{AfterCharge: func(context.Context) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(crashed)
			<-resume
		}
	}}
	const lease = time.Hour
	e := newEnv(t, withLease(lease), withWait(50*time.Millisecond), withFaults(faults))
	// Registered after the server, so it runs before the server's cleanup
	// waits for the frozen request.
	var resumeOnce sync.Once
	letGo := func() { resumeOnce.Do(func() { close(resume) }) }
	t.Cleanup(letGo)

	token := e.signUp("crash@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 2))
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

	frozen := e.async(pay)
	recv(t, crashed, "the first attempt to crash after the charge")
	if got := e.sideEffects(); got.charges != 1 || got.payments != 0 || got.storedKeys != 1 {
		t.Fatalf("after the crash: %+v; want the charge made and nothing recorded", got)
	}
	if n := e.count("idempotency_keys", `"key" = ? AND state = ? AND owner_token <> ''`, "pay", "in_progress"); n != 1 {
		t.Fatal("the crashed attempt's key is not in progress under its owner")
	}

	// Within the lease the key is still the crashed attempt's.
	isProblem(t, e.do(pay), http.StatusConflict, "/problems/idempotency-key-in-progress")
	if calls := e.provider.Calls(); calls != 1 {
		t.Fatalf("%d provider calls before the lease passed, want 1", calls)
	}

	e.clock.Advance(lease + time.Second)
	retry := e.do(pay)
	if retry.Status != http.StatusCreated || retry.replayed() {
		t.Fatalf("retry after the lease: %d replayed=%v %s", retry.Status, retry.replayed(), retry.Body)
	}
	var charge string
	e.db.Table("simulated_charges").Pluck("id", &charge)
	if got := retry.json(t)["provider_charge_id"]; got != charge {
		t.Fatalf("the retry recorded charge %v, want the crashed attempt's %s", got, charge)
	}
	wantPaidOnce := func(when string) {
		t.Helper()
		got := e.sideEffects()
		if got.charges != 1 || got.payments != 1 || e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 {
			t.Fatalf("%s: %+v, want one charge, one payment, the order paid", when, got)
		}
	}
	wantPaidOnce("after the takeover")
	if calls := e.provider.Calls(); calls != 2 {
		t.Fatalf("%d provider calls, want 2 (the crashed one and the re-run)", calls)
	}
	again := e.do(pay)
	if again.Status != http.StatusCreated || !again.replayed() || !bytes.Equal(again.Body, retry.Body) {
		t.Fatalf("replay: %d replayed=%v %s", again.Status, again.replayed(), again.Body)
	}

	// The frozen attempt comes back to life: fenced, it records nothing.
	letGo()
	late := recv(t, frozen, "the frozen attempt's answer")
	if late.err != nil {
		t.Fatal(late.err)
	}
	isProblem(t, late.response, http.StatusConflict, "/problems/idempotency-lease-lost")
	wantPaidOnce("after the late attempt")
	if r := e.do(pay); !r.replayed() || !bytes.Equal(r.Body, retry.Body) {
		t.Fatalf("after the late attempt the key answers %d %s, want the retry's answer", r.Status, r.Body)
	}
}
