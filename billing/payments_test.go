package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
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
