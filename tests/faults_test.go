package tests

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// A process that dies after the provider charged and before the payment was
// committed leaves the key in progress under its lease, and the charge at
// the provider. Until the lease passes a retry is told to wait; after it,
// the retry takes the key over, re-runs with the same derived key, gets the
// provider's first charge back, and pays the order: one charge, one payment.
//
// The crash is a provider that charges and then blocks the first attempt's goroutine,
// so the database is left exactly as a dead process leaves it. The lease is
// long (an hour, on the test clock) so that the frozen attempt's heartbeat
// does not tick while the test runs, as a dead process's would not. Let go
// at the end, the attempt is fenced: it commits nothing and answers 409.
func TestCrashAfterChargeIsTakenOver(t *testing.T) {
	crashed, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	freeze := func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(crashed)
			<-resume
		}
	}
	const lease = time.Hour
	e := newEnv(t, withLease(lease), withWait(50*time.Millisecond), withAfterCharge(freeze))
	// Registered after the server, so it runs before the server's cleanup
	// waits for the frozen request.
	var resumeOnce sync.Once
	letGo := func() { resumeOnce.Do(func() { close(resume) }) }
	t.Cleanup(letGo)

	token := e.signUp("crash@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 2))
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

	frozen := e.async(pay)
	testkit.Recv(t, crashed, "the first attempt to crash after the charge")
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
	late := testkit.Recv(t, frozen, "the frozen attempt's answer")
	if late.err != nil {
		t.Fatal(late.err)
	}
	isProblem(t, late.response, http.StatusConflict, "/problems/idempotency-lease-lost")
	wantPaidOnce("after the late attempt")
	if r := e.do(pay); !r.replayed() || !bytes.Equal(r.Body, retry.Body) {
		t.Fatalf("after the late attempt the key answers %d %s, want the retry's answer", r.Status, r.Body)
	}
}

// blockingProvider holds the first charge at the provider until the test
// lets it go, like a provider that is slow to answer.
type blockingProvider struct {
	payments.Provider
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *blockingProvider) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	first := false
	b.once.Do(func() { first = true })
	if first {
		close(b.entered)
		<-b.release
	}
	return b.Provider.Charge(ctx, req)
}

// A payment slower than the lease keeps both its key and its hold on the
// order: the heartbeat extends them together, to the same end. Another payment of the order
// with another key, sent after the first lease would have run out, is told
// a payment is in progress instead of charging the order a second time.
// The heartbeat ticks on real time (every third of a short lease), but the
// leases run on the test's clock, which moves only when told: once the
// clock is past the first lease, the test waits for a tick to have extended
// both, and no late tick can let them pass. It counts charges.
func TestSlowPaymentKeepsItsHoldOnTheOrder(t *testing.T) {
	const lease = 300 * time.Millisecond
	provider := &blockingProvider{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, withLease(lease), withWait(0), withProvider(func(p payments.Provider) payments.Provider {
		provider.Provider = p
		return provider
	}))
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(provider.release) }) }
	t.Cleanup(letGo)
	token := e.signUp("slow-pay@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	path := "/api/v1/orders/" + orderID + "/payments"

	slow := e.async(request{method: "POST", path: path, token: token, key: key("slow"), body: payBody(payments.MethodVisa)})
	testkit.Recv(t, provider.entered, "the slow payment at the provider")
	firstLease := e.leases("slow", orderID)
	e.clock.Advance(2 * lease) // the slow payment outlives its first lease
	now := e.clock.Now()
	if !now.After(firstLease.key) || !now.After(firstLease.hold) {
		t.Fatalf("key held until %v, order until %v; want both passed at %v", firstLease.key, firstLease.hold, now)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l := e.leases("slow", orderID)
		if l.key.After(now) && l.hold.After(now) {
			if !l.hold.Equal(l.key) {
				t.Fatalf("the key is held until %v, the order until %v: want the hold to end with the lease", l.key, l.hold)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("at %v the key is held until %v and the order until %v: the heartbeat did not extend them", now, l.key, l.hold)
		}
	}
	isProblem(t, e.do(request{method: "POST", path: path, token: token, key: key("slow"), body: payBody(payments.MethodVisa)}),
		http.StatusConflict, "/problems/idempotency-key-in-progress")
	isProblem(t, e.do(request{method: "POST", path: path, token: token, key: key("other"), body: payBody(payments.MethodVisa)}),
		http.StatusConflict, "/problems/payment-in-progress")

	letGo()
	first := testkit.Recv(t, slow, "the slow payment's answer")
	if first.err != nil || first.Status != http.StatusCreated {
		t.Fatalf("slow payment: %v %d %s", first.err, first.Status, first.Body)
	}
	if c, pays, calls := e.charges(), e.count("payments"), e.provider.Calls(); c != 1 || pays != 1 || calls != 1 {
		t.Fatalf("%d charges, %d payments, %d provider calls; want 1, 1, 1", c, pays, calls)
	}
}

// leases are the ends of a payment's lease on its key and of its hold on
// the order.
type leases struct{ key, hold time.Time }

func (e *env) leases(idempotencyKey, orderID string) leases {
	e.t.Helper()
	var k middleware.IdempotencyKey
	if err := e.db.Where("\"key\" = ?", idempotencyKey).Take(&k).Error; err != nil {
		e.t.Fatal(err)
	}
	var o models.Order
	if err := e.db.Take(&o, "id = ?", orderID).Error; err != nil || o.HeldUntil == nil {
		e.t.Fatalf("order %s: %v, hold %v", orderID, err, o.HeldUntil)
	}
	return leases{k.LockedUntil, *o.HeldUntil}
}
