package tests

import (
	"maps"
	"net/http"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Each payment is a resource of its own: the Location of a 201 (and of a
// declined payment's 402) is its URL, which serves it to its owner only.
func TestPaymentsAreResources(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.signUp("alice@example.com"), e.signUp("bob@example.com")
	p := e.products()
	orderID := e.createOrder(alice, "order", orderBody(p[0], 1))
	otherOrder := e.createOrder(alice, "other", orderBody(p[1], 1))
	pay := "/api/v1/orders/" + orderID + "/payments"

	declined := e.do(request{method: "POST", path: pay, token: alice, key: key("declined"), body: payBody(payments.MethodDeclined)})
	paid := e.do(request{method: "POST", path: pay, token: alice, key: key("visa"), body: payBody(payments.MethodVisa)})
	if declined.Status != http.StatusPaymentRequired || paid.Status != http.StatusCreated {
		t.Fatalf("declined %d, paid %d", declined.Status, paid.Status)
	}
	var rows []models.Payment
	if err := e.db.Where("order_id = ?", orderID).Order("created_at, id").Find(&rows).Error; err != nil || len(rows) != 2 {
		t.Fatalf("payment rows %v %v, want 2", rows, err)
	}
	answers := []map[string]any{declined.json(t)["payment"].(map[string]any), paid.json(t)}
	for i, r := range []response{declined, paid} {
		want := pay + "/" + rows[i].ID
		if loc := r.Header.Get("Location"); loc != want {
			t.Fatalf("answer %d: Location %q, want %q", i, loc, want)
		}
		got := e.do(request{method: "GET", path: want, token: alice})
		if got.Status != http.StatusOK || !maps.Equal(got.json(t), answers[i]) || got.json(t)["status"] != string(rows[i].Status) {
			t.Fatalf("GET %s: %d %s, want %v", want, got.Status, got.Body, answers[i])
		}
	}
	for _, tc := range []struct {
		name, path, token string
	}{
		{"another user's payment", pay + "/" + rows[1].ID, bob},
		{"under another order", "/api/v1/orders/" + otherOrder + "/payments/" + rows[1].ID, alice},
		{"unknown payment", pay + "/00000000-0000-0000-0000-000000000000", alice},
		{"not a payment id", pay + "/1", alice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isProblem(t, e.do(request{method: "GET", path: tc.path, token: tc.token}), http.StatusNotFound, "/problems/not-found")
		})
	}
	isProblem(t, e.do(request{method: "GET", path: pay + "/" + rows[1].ID}), http.StatusUnauthorized, "/problems/unauthorized")
}
