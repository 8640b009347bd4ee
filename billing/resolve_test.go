package billing_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// A provider's event about an attempt in doubt that another run settles while the event
// waits to take the order's hold is applied as a late word on a settled attempt: the
// provider says it charged an attempt settled as failed, so the charge is recorded and the
// order paid, not dropped as if nothing were left to do.
func TestAnEventOnAnAttemptSettledWhileItWaitsIsALateWord(t *testing.T) {
	const orderID, derived = "00000000-0000-4000-8000-0000000000ab", "idem_pay_in_doubt"
	db := anAttemptInDoubt(t, orderID, derived)
	// The provider did charge under the attempt's key; its answer was lost.
	provider := &payments.Simulated{DB: db}
	charge, err := provider.Charge(context.Background(), payments.ChargeRequest{IdempotencyKey: derived, OrderID: orderID,
		AmountCents: 100, Currency: "USD", PaymentMethod: "pm_card_visa"})
	if err != nil || charge.Status != models.Succeeded {
		t.Fatalf("the provider's charge: %+v, %v", charge, err)
	}
	// Another run (the reconciler, told the provider has no record) settles the attempt as
	// failed and lets the order go, not committed yet.
	settling := testkit.Lock(t, db,
		"UPDATE payment_attempts SET state = 'failed' WHERE id = '"+orderID+"'",
		"UPDATE orders SET held_by = NULL, held_until = NULL WHERE id = '"+orderID+"'")
	svc := billing.New(billing.Config{DB: db, Provider: provider, Lease: time.Minute, AttemptTimeout: time.Minute})
	type result struct {
		applied bool
		err     error
	}
	applied := make(chan result, 1)
	go func() {
		event := payments.Event{ID: "evt_charged", ProviderKey: derived, Charge: charge}
		ok, err := svc.ApplyEvent(context.Background(), func() *gorm.DB { return db }, event)
		applied <- result{ok, err}
	}()
	settling.WaitUntilBlocking(t, "the event to wait for the order behind the settlement")
	if err := settling.End("COMMIT"); err != nil {
		t.Fatal(err)
	}
	got := testkit.Recv(t, applied, "the event's answer")
	if got.err != nil || !got.applied {
		t.Fatalf("the event: applied %v, %v; want it recorded as a late charge", got.applied, got.err)
	}
	var recorded, paid, charged int64
	if err := db.Model(&models.Payment{}).Where("order_id = ? AND status = ? AND provider_charge_id = ?", orderID, models.Succeeded, charge.ID).Count(&recorded).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Model(&models.Order{}).Where("id = ? AND status = ?", orderID, models.OrderPaid).Count(&paid).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Table("simulated_charges").Where("status = ?", models.Succeeded).Count(&charged).Error; err != nil { // the provider's own ledger
		t.Fatal(err)
	}
	if recorded != 1 || paid != 1 || charged != 1 {
		t.Fatalf("%d payments of the provider's charge, order paid: %d, %d charges at the provider; want the one charge recorded once and the order paid",
			recorded, paid, charged)
	}
}
