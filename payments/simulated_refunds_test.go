package payments_test

import (
	"context"
	"testing"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// A refund asked again under its key gets its first answer, and the
// simulated provider's ledger still holds that one refund: no second row,
// and no empty one.
func TestSimulatedRefundRepeatedAddsNothingToTheLedger(t *testing.T) {
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(&payments.SimulatedCharge{}, &payments.SimulatedRefund{}); err != nil {
		t.Fatal(err)
	}
	p := &payments.Simulated{DB: db}
	ctx := context.Background()
	charge, err := p.Charge(ctx, payments.ChargeRequest{IdempotencyKey: "idem_charge", OrderID: "o1", AmountCents: 1900, Currency: "USD", PaymentMethod: payments.MethodVisa})
	if err != nil || charge.Status != models.Succeeded {
		t.Fatalf("charge: %+v %v", charge, err)
	}
	req := payments.RefundRequest{IdempotencyKey: "idem_refund", ChargeID: charge.ID, OrderID: "o1", AmountCents: 700, Currency: "USD"}
	first, err := p.Refund(ctx, req)
	if err != nil || first.State != models.Succeeded {
		t.Fatalf("refund: %+v %v", first, err)
	}
	for range 3 {
		again, err := p.Refund(ctx, req)
		if err != nil || again != first {
			t.Fatalf("the refund asked again: %+v %v; want its first answer %+v", again, err, first)
		}
	}
	var rows []payments.SimulatedRefund
	if err := db.Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != first.ID || rows[0].IdempotencyKey != req.IdempotencyKey {
		t.Fatalf("the provider's ledger: %+v; want the one refund", rows)
	}
}
