package tests

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

const webhookSecret = "whsec_test_shop"

func withWebhookSecret() option {
	return func(deps *setup) { deps.StripeWebhookSecret = webhookSecret }
}

// stripeEvent is a webhook delivery as Stripe sends it, signed with the
// endpoint's secret by stripe-go's own test helper.
func stripeEvent(t *testing.T, id string, typ stripe.EventType, intent map[string]any) request {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": stripe.APIVersion, "type": typ, "created": time.Now().Unix(),
		"livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": intent},
	})
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: webhookSecret, Timestamp: time.Now()})
	return request{method: "POST", path: "/webhooks/stripe", body: string(payload), header: http.Header{"Stripe-Signature": {signed.Header}}}
}

// inDoubt pays an order whose provider answer is lost: the charge is made
// and the attempt stays in doubt. It returns the order and the attempt.
func inDoubt(t *testing.T) (*env, string, models.PaymentAttempt) {
	t.Helper()
	return lostPayment(t, &failing{err: errors.New("read: connection reset by peer"), afterCharge: true, n: 1}, models.InDoubt)
}

// lostPayment pays an order through the provider lost, and returns the
// order and its attempt, which must be in the given state.
func lostPayment(t *testing.T, lost *failing, state models.State) (*env, string, models.PaymentAttempt) {
	t.Helper()
	e := newEnv(t, withWebhookSecret(), withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token := e.signUp("webhook@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	if r := e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)); r.Status != http.StatusBadGateway {
		t.Fatalf("the lost payment: %d %s", r.Status, r.Body)
	}
	var attempt models.PaymentAttempt
	if err := e.db.Where("order_id = ? AND state = ?", orderID, state).Take(&attempt).Error; err != nil {
		t.Fatalf("no attempt %s: %v", state, err)
	}
	return e, orderID, attempt
}

func intentOf(a models.PaymentAttempt, status string) map[string]any {
	return map[string]any{"id": "pi_webhook", "object": "payment_intent", "status": status, "amount": a.AmountCents,
		"currency": "usd", "metadata": map[string]string{"idempotency_key": a.ProviderKey, "order_id": a.OrderID}}
}

// Stripe delivers an event five times at once (it retries for days, and
// concurrently): it is applied once, through the idempotency middleware
// under scope "stripe" with the event id as the key, and every delivery
// gets the stored 2xx.
func TestWebhookRedeliveredConcurrentlyIsAppliedOnce(t *testing.T) {
	e, orderID, attempt := inDoubt(t)
	event := stripeEvent(t, "evt_succeeded_1", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded"))
	answers := e.concurrently([]request{event, event, event, event, event})
	fresh := 0
	for _, r := range answers {
		if r.Status != http.StatusOK {
			t.Fatalf("a delivery got %d %s", r.Status, r.Body)
		}
		if r.json(t)["applied"] != true {
			t.Fatalf("a delivery answered %s, want the stored applied answer", r.Body)
		}
		if !r.replayed() {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d deliveries ran, want 1 (the others replayed)", fresh)
	}
	if e.count("idempotency_keys", `scope = ? AND "key" = ? AND state = ?`, "stripe", "evt_succeeded_1", "completed") != 1 {
		t.Fatal("the event's key is not one completed key of scope stripe")
	}
	if e.count("payments") != 1 || e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 {
		t.Fatalf("%d payments; want 1 and the order paid", e.count("payments"))
	}
	var payment models.Payment
	e.db.Take(&payment)
	if payment.ProviderChargeID != "pi_webhook" || payment.ProviderKey != attempt.ProviderKey {
		t.Fatalf("payment %+v, want the event's PaymentIntent under the attempt's key", payment)
	}
	if e.count("payment_attempts", "id = ? AND state = ?", attempt.ID, models.Succeeded) != 1 {
		t.Fatal("the attempt is not succeeded")
	}
	wantEventPerFact(t, e.db, outbox.OrderPaid, 1)
}

// A bad or missing signature gets 400 and writes nothing; so does an event
// signed with another secret, or signed too long ago.
func TestWebhookWithoutAValidSignatureWritesNothing(t *testing.T) {
	e, _, attempt := inDoubt(t)
	before := e.sideEffects()
	good := stripeEvent(t, "evt_forged", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded"))
	good.offContract = true // each breaks the signature on purpose
	missing := good
	missing.header = nil
	tampered := good
	tampered.body = good.body[:len(good.body)-1] + " }"
	otherSecret := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(good.body), Secret: "whsec_other", Timestamp: time.Now()})
	wrongSecret := good
	wrongSecret.header = http.Header{"Stripe-Signature": {otherSecret.Header}}
	old := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(good.body), Secret: webhookSecret, Timestamp: time.Now().Add(-time.Hour)})
	stale := good
	stale.header = http.Header{"Stripe-Signature": {old.Header}}
	for name, r := range map[string]request{"missing": missing, "tampered": tampered, "other secret": wrongSecret, "stale": stale} {
		isProblem(t, e.do(r), http.StatusBadRequest, "/problems/webhook-signature-invalid")
		if got := e.sideEffects(); got != before {
			t.Fatalf("%s signature wrote %+v (before: %+v)", name, got, before)
		}
	}
	if e.count("payment_attempts", "state = ?", models.InDoubt) != 1 {
		t.Fatal("a refused event resolved the attempt")
	}
}

// Out of order: payment_failed delivered after payment_succeeded never
// un-pays the order. Unknown event types get 2xx and change nothing.
func TestWebhookOutOfOrderNeverUnpays(t *testing.T) {
	e, orderID, attempt := inDoubt(t)
	if r := e.do(stripeEvent(t, "evt_ok", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded"))); r.Status != http.StatusOK {
		t.Fatalf("succeeded: %d %s", r.Status, r.Body)
	}
	late := e.do(stripeEvent(t, "evt_late_failure", stripe.EventTypePaymentIntentPaymentFailed, intentOf(attempt, "requires_payment_method")))
	if late.Status != http.StatusOK || late.json(t)["applied"] != false {
		t.Fatalf("late failure: %d %s; want 200, not applied", late.Status, late.Body)
	}
	unknown := e.do(stripeEvent(t, "evt_customer", "customer.created", map[string]any{"id": "cus_1", "object": "customer"}))
	if unknown.Status != http.StatusOK || unknown.json(t)["applied"] != false {
		t.Fatalf("unknown event: %d %s", unknown.Status, unknown.Body)
	}
	if e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 || e.count("payments") != 1 ||
		e.count("payment_attempts", "state = ?", models.Succeeded) != 1 {
		t.Fatal("the order is no longer paid once")
	}
}

// payment_failed for an attempt in doubt records the decline and frees the
// order: a new key then pays it, and the provider holds that one charge.
// The attempt's request was lost on its way: it charged nothing.
func TestWebhookFailureFreesTheOrder(t *testing.T) {
	e, orderID, attempt := lostPayment(t, &failing{err: errors.New("write: broken pipe"), n: 1}, models.InDoubt)
	intent := intentOf(attempt, "requires_payment_method")
	intent["last_payment_error"] = map[string]any{"type": "card_error", "message": "Your card was declined."}
	if r := e.do(stripeEvent(t, "evt_failed", stripe.EventTypePaymentIntentPaymentFailed, intent)); r.Status != http.StatusOK || r.json(t)["applied"] != true {
		t.Fatalf("failed: %d %s", r.Status, r.Body)
	}
	var declined models.Payment
	if err := e.db.Where("status = ?", "declined").Take(&declined).Error; err != nil || declined.DeclineReason != "Your card was declined." {
		t.Fatalf("declined payment: %+v %v", declined, err)
	}
	token := e.signUpAgain("webhook@example.com")
	if r := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("a new key after the failure: %d %s", r.Status, r.Body)
	}
	e.paidOnce("after the new key", orderID)
}

// Stripe reports a charge for an attempt the shop recorded as refused (the
// provider said nothing was charged, and was wrong): the charge is
// recorded all the same, the order paid, and it is counted for a person.
func TestWebhookRecordsAChargeTheShopThoughtRefused(t *testing.T) {
	e, orderID, attempt := lostPayment(t, &failing{err: payments.ErrUnavailable, afterCharge: true, n: 1}, models.Failed)
	r := e.do(stripeEvent(t, "evt_late", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded")))
	if r.Status != http.StatusOK || r.json(t)["applied"] != true {
		t.Fatalf("late charge: %d %s", r.Status, r.Body)
	}
	e.paidOnce("after the late charge", orderID)
	metrics := string(e.do(request{method: "GET", path: "/metrics"}).Body)
	if !strings.Contains(metrics, `shop_payment_resolutions_total{by="webhook",outcome="late_charge"} 1`) {
		t.Fatal("the late charge is not counted")
	}
	wantEventPerFact(t, e.db, outbox.OrderPaid, 1)
}

// The same late charge after the shopper cancelled the order (its units
// back on sale, the shopper told nothing was charged): the charge is
// recorded and counted for a person to refund, and the order stays
// cancelled, its units not taken twice.
func TestLateChargeOnACancelledOrderKeepsItCancelled(t *testing.T) {
	e, orderID, attempt := lostPayment(t, &failing{err: payments.ErrUnavailable, afterCharge: true, n: 1}, models.Failed)
	token := e.signUpAgain("webhook@example.com")
	if r := e.do(e.cancelRequest(token, orderID, "cancel", `{}`)); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	r := e.do(stripeEvent(t, "evt_late", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded")))
	if r.Status != http.StatusOK || r.json(t)["applied"] != true {
		t.Fatalf("late charge: %d %s", r.Status, r.Body)
	}
	if n := e.count("orders", "id = ? AND status = ? AND restocked_at IS NOT NULL", orderID, models.OrderCancelled); n != 1 {
		t.Fatal("the late charge brought the cancelled order back")
	}
	if n := e.count("payments", "order_id = ? AND status = ?", orderID, models.Succeeded); n != 1 {
		t.Fatalf("%d succeeded payments recorded, want the late charge's one", n)
	}
	if violations, err := testkit.AuditStock(e.db, nil); err != nil || len(violations) != 0 {
		t.Fatalf("stock audit: %q, %v", violations, err)
	}
	metrics := string(e.do(request{method: "GET", path: "/metrics"}).Body)
	if !strings.Contains(metrics, `shop_payment_resolutions_total{by="webhook",outcome="late_charge"} 1`) {
		t.Fatal("the late charge is not counted")
	}
	wantEventPerFact(t, e.db, outbox.OrderPaid, 1)
}

// signUpAgain gets a new token for an existing account.
func (e *env) signUpAgain(email string) string {
	e.t.Helper()
	r := e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"` + email + `","password":"correct horse"}`})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	return r.json(e.t)["token"].(string)
}
