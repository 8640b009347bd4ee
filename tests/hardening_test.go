package tests

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/shop/shop/payments"
)

// keyStateOf reads the state the keys listing gives one key.
func (e *env) keyStateOf(token, key string) string {
	e.t.Helper()
	r := e.do(request{method: "GET", path: "/api/v1/idempotency-keys", token: token})
	var list struct {
		Keys []struct{ Key, State string } `json:"idempotency_keys"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		e.t.Fatalf("keys: %v %s", err, r.Body)
	}
	for _, k := range list.Keys {
		if k.Key == key {
			return k.State
		}
	}
	e.t.Fatalf("key %q is not listed: %s", key, r.Body)
	return ""
}

// A payment answered 502 whose key could not be released (the database
// link was cut) leaves its key in progress with nobody holding it. Once its
// lease passes the listing calls it released, and the retry with another
// card, which the README allows for a released key, pays the order once.
func TestKeyWhoseReleaseFailedIsReleasedOnceItsLeasePasses(t *testing.T) {
	e := newEnv(t)
	err := e.db.Callback().Raw().Before("gorm:raw").Register("test:fail-release", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "SET owner_token = ''") {
			_ = tx.AddError(errors.New("test: the database link is cut"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	token := e.signUp("ann@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	pay := func(method string) response {
		return e.do(request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(method)})
	}
	isProblem(t, pay(payments.MethodUnavailable), http.StatusBadGateway, "/problems/payment-provider-unavailable")
	if state := e.keyStateOf(token, "pay"); state != "in_progress" {
		t.Fatalf("state %q while the lease runs, want in_progress", state)
	}
	e.clock.Advance(e.deps.Lease)
	if state := e.keyStateOf(token, "pay"); state != "released" {
		t.Fatalf("state %q once the lease passed, want released", state)
	}
	if r := pay(payments.MethodVisa); r.Status != http.StatusCreated {
		t.Fatalf("retry with another card: %d %s", r.Status, r.Body)
	}
	if n, paid := e.charges(), e.count("orders", "id = ? AND status = ?", orderID, "paid"); n != 1 || paid != 1 {
		t.Fatalf("%d charges, order paid %d; want one charge and the order paid", n, paid)
	}
}
