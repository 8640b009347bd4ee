package billing_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// TestStaleAttemptsLeaveHeldOrdersOut: the reconciler takes on only the
// attempts in doubt whose order nobody holds, or whose hold has lapsed;
// never one a live operation holds, nor one already resolved.
func TestStaleAttemptsLeaveHeldOrdersOut(t *testing.T) {
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	live, lapsed := now.Add(time.Minute), now.Add(-time.Second)
	holder := "idem_live/run"
	orders := []struct {
		id      string
		heldBy  *string
		until   *time.Time
		state   models.State
		wantOut bool
	}{
		{"00000000-0000-4000-8000-000000000001", nil, nil, models.InDoubt, false},
		{"00000000-0000-4000-8000-000000000002", &holder, &live, models.InDoubt, true},
		{"00000000-0000-4000-8000-000000000003", &holder, &lapsed, models.InDoubt, false},
		{"00000000-0000-4000-8000-000000000004", nil, nil, models.Succeeded, true},
	}
	for i, o := range orders {
		order := models.Order{ID: o.id, Number: int64(1001 + i), UserID: "u", Status: models.OrderPending, Currency: "USD", TotalCents: 100,
			DerivedKey: "idem_" + o.id, HeldBy: o.heldBy, HeldUntil: o.until}
		if err := db.Create(&order).Error; err != nil {
			t.Fatal(err)
		}
		attempt := models.PaymentAttempt{Request: models.Request{ID: o.id, OrderID: o.id, DerivedKey: order.DerivedKey, ProviderKey: order.DerivedKey,
			State: o.state, CreatedAt: now.Add(time.Duration(i) * time.Second)}, AmountCents: 100, Currency: "USD", PaymentMethod: "pm_card_visa"}
		if err := db.Create(&attempt).Error; err != nil {
			t.Fatal(err)
		}
	}
	stale, err := billing.Stale[models.PaymentAttempt](context.Background(), billing.Ledger{DB: db}, now, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, a := range stale {
		got[a.OrderID] = true
	}
	for _, o := range orders {
		if got[o.id] == o.wantOut {
			t.Errorf("order %s (held by %v until %v, attempt %s): listed %v, want %v", o.id, o.heldBy, o.until, o.state, got[o.id], !o.wantOut)
		}
	}
}

// A payment retried while another run's settlement of its own attempt is written but not
// yet committed (on SQLite, in the group-commit transaction the retry's write joins) is
// answered with that payment, not with "already paid": the refusal and the read of the
// answer see the same writes.
func TestARetryRefusedByItsOwnSettlementGetsThePayment(t *testing.T) {
	const orderID, derived = "00000000-0000-4000-8000-0000000000aa", "idem_pay_retried"
	db := anAttemptInDoubt(t, orderID, derived)
	// Another run settles the attempt (as the reconciler does at start-up), not committed yet.
	settling := db.Begin()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(settling.Model(&models.Order{}).Where("id = ?", orderID).Update("status", models.OrderPaid).Error)
	must(settling.Model(&models.PaymentAttempt{}).Where("id = ?", orderID).Update("state", models.Succeeded).Error)
	must(settling.Create(&models.Payment{ID: "pay-1", OrderID: orderID, Status: models.Succeeded, AmountCents: 100, Currency: "USD",
		PaymentMethod: "pm_card_visa", ProviderChargeID: "ch_1", ProviderKey: derived, CreatedAt: time.Now()}).Error)
	svc := billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}, Lease: time.Minute, AttemptTimeout: time.Minute})
	type result struct {
		payment models.Payment
		err     error
	}
	paid := make(chan result, 1)
	go func() {
		p, err := svc.Pay(context.Background(), billing.Operation{DerivedKey: derived, Holder: "idem_retry/run", Tx: func() *gorm.DB { return db }},
			"u", orderID, "pm_card_visa")
		paid <- result{p, err}
	}()
	time.Sleep(200 * time.Millisecond) // the retry waits to write behind the settlement
	// Another write waits behind the retry: on SQLite the shared transaction stays open
	// while it runs, after the retry's refused write.
	hold, held := make(chan struct{}), make(chan error, 1)
	go func() { held <- db.Transaction(func(tx *gorm.DB) error { <-hold; return tx.Exec("SELECT 1").Error }) }()
	time.Sleep(200 * time.Millisecond)
	committed := make(chan error, 1)
	go func() { committed <- settling.Commit().Error }()
	var got result
	select {
	case got = <-paid:
	case <-time.After(time.Second): // the retry reads its answer behind the other write
	}
	close(hold)
	if got.payment.ID == "" && got.err == nil {
		got = testkit.Recv(t, paid, "the retry's answer")
	}
	must(testkit.Recv(t, held, "the other write"))
	must(testkit.Recv(t, committed, "the settlement's commit"))
	if got.err != nil || got.payment.ID != "pay-1" || got.payment.Status != models.Succeeded {
		t.Fatalf("the retry got %+v, %v; want the payment its own attempt made", got.payment, got.err)
	}
	var payments, charged int64
	must(db.Model(&models.Payment{}).Where("order_id = ?", orderID).Count(&payments).Error)
	must(db.Table("simulated_charges").Count(&charged).Error) // the provider's own ledger
	if payments != 1 || charged != 0 {
		t.Fatalf("%d payments of the order and %d charges at the provider, want 1 and none (the settled attempt's)", payments, charged)
	}
}

// anAttemptInDoubt is a fresh database holding a pending order of 100 cents, orderID, and
// its payment attempt in doubt, under derived (its key and the provider's).
func anAttemptInDoubt(t *testing.T, orderID, derived string) *gorm.DB {
	t.Helper()
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	order := models.Order{ID: orderID, Number: 1001, UserID: "u", Status: models.OrderPending, Currency: "USD", TotalCents: 100, DerivedKey: "idem_order"}
	attempt := models.PaymentAttempt{Request: models.Request{ID: orderID, OrderID: orderID, DerivedKey: derived, ProviderKey: derived,
		State: models.InDoubt, CreatedAt: time.Now()}, AmountCents: 100, Currency: "USD", PaymentMethod: "pm_card_visa"}
	for _, row := range []any{&order, &attempt} {
		if err := db.Create(row).Error; err != nil {
			t.Fatal(err)
		}
	}
	return db
}
