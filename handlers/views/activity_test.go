package views

import (
	"strings"
	"testing"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// A payment is told as paid only when it succeeded: one whose first answer
// was lost (its key released) and which the shop confirmed later says so,
// and one still in doubt or failed is an attempt, not a payment.
func TestActivityTellsAPaymentByItsState(t *testing.T) {
	released := middleware.IdempotencyKey{Scope: "u", Key: "k1", OperationID: "op1", Route: "/orders/:id/payments", State: middleware.KeyInProgress}
	completed := middleware.IdempotencyKey{Scope: "u", Key: "k2", OperationID: "op2", Route: "/orders/:id/payments", State: middleware.KeyCompleted, Status: 201}
	for _, c := range []struct {
		key          middleware.IdempotencyKey
		status       models.State
		what, result string
	}{
		{released, models.Succeeded, "Paid order #1001", "the shop has since confirmed the payment"},
		{released, models.InDoubt, "Tried to pay for order #1001", "it did not go through"},
		{released, models.Failed, "Tried to pay for order #1001", "it did not go through"},
		{completed, models.Succeeded, "Paid order #1001", "done"},
		{completed, models.Declined, "Tried to pay order #1001", WordsOf(models.ErrPaymentDeclined).Outcome},
	} {
		traces := audit.Traces{
			Payments: map[string]models.Payment{middleware.DerivedKeyOf(c.key): {OrderID: "o1", Status: c.status}},
			Numbers:  map[string]int64{"o1": 1001},
		}
		a := ActivityOf(c.key, traces, "o1")
		if a.What != c.what || a.Href != OrderPath("o1") || !strings.Contains(a.Result, c.result) {
			t.Errorf("a %s payment under a %s key: %+v, want %q, %q", c.status, c.key.State, a, c.what, c.result)
		}
	}
}
