package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/config"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// awaitingIntent is a PaymentIntent that asks its customer to authenticate,
// as Stripe answers a confirmation with a 3-D Secure card and a return_url.
func awaitingIntent(n int, form url.Values, key string) []byte {
	return fmt.Appendf(nil,
		`{"id":"pi_fake%d","object":"payment_intent","status":"requires_action","amount":%s,"currency":%q,"metadata":{"idempotency_key":%q},`+
			`"next_action":{"type":"redirect_to_url","redirect_to_url":{"url":"https://hooks.stripe.com/3d_secure_2/hosted?pi=pi_fake%d","return_url":%q}}}`,
		n, form.Get("amount"), form.Get("currency"), key, n, form.Get("return_url"))
}

// retrieve answers GET /v1/payment_intents/{id}: the PaymentIntent as it is
// now, which a replay of its creation under its key does not show; and
// POST /v1/payment_intents/{id}/cancel, which cancels one still waiting.
func (f *fakeStripe) retrieve(w http.ResponseWriter, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	id, cancel := strings.CutSuffix(id, "/cancel")
	for key, intent := range f.kept {
		if !strings.Contains(string(intent.body), `"id":"`+id+`"`) {
			continue
		}
		if cancel {
			body := string(intent.body)
			if !strings.Contains(body, `"status":"requires_action"`) {
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"payment_intent_unexpected_state","message":"This PaymentIntent cannot be canceled."}}`))
				return
			}
			body = strings.Replace(body, `"status":"requires_action"`, `"status":"canceled"`, 1)
			intent.body = []byte(body[:strings.Index(body, `,"next_action"`)] + "}")
			f.kept[key] = intent
		}
		w.Write(intent.body)
		return
	}
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such payment_intent"}}`))
}

// authenticated is the customer completing 3-D Secure on Stripe's page:
// the PaymentIntent succeeds. Stripe still replays the creation's answer
// under its key.
func (f *fakeStripe) authenticated(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	intent := f.kept[key]
	body := strings.Replace(string(intent.body), `"status":"requires_action"`, `"status":"succeeded"`, 1)
	intent.body = []byte(body[:strings.Index(body, `,"next_action"`)] + "}")
	f.kept[key] = intent
}

// Against a fake Stripe: a confirmation that requires action is the 202 with
// Stripe's own redirect, confirmed with the order's page as return_url; once
// the customer has authenticated, the return (the order's GET reads the
// PaymentIntent) and the payment_intent.succeeded webhook, in either order,
// record the charge once: one payment.
func TestStripeAuthenticationIsRecordedOnceOnReturnAndWebhook(t *testing.T) {
	for _, webhookFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("webhook first %v", webhookFirst), func(t *testing.T) {
			fake, base := newFakeStripe(t)
			e := newEnv(t, withStripe(base, http.DefaultTransport), withWebhookSecret())
			token := e.signUp("stripe-3ds@example.com")
			orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
			r, page := e.payToAuthenticate(token, orderID, "k1")
			if !strings.HasPrefix(page, "https://hooks.stripe.com/") {
				t.Fatalf("the next action is %q, want Stripe's page (%s)", page, r.Body)
			}
			var attempt models.PaymentAttempt
			must(t, e.db.Where("order_id = ?", orderID).Take(&attempt).Error)
			fake.mu.Lock()
			params, _ := url.ParseQuery(fake.kept[attempt.ProviderKey].params)
			fake.mu.Unlock()
			if params.Get("return_url") != "/orders/"+orderID {
				t.Fatalf("confirmed with return_url %q", params.Get("return_url"))
			}
			if state := e.attemptState(token, orderID); state != models.RequiresAction {
				t.Fatalf("before the customer authenticates the attempt is %q", state)
			}

			fake.authenticated(attempt.ProviderKey)
			// With Stripe the shopper returns to the order's page, a read:
			// it asks Stripe once PAYMENT_AUTH_POLL has passed since the
			// read above asked.
			e.clock.Advance(config.Default().AuthPoll)
			fake.mu.Lock()
			var intent map[string]any
			must(t, json.Unmarshal(fake.kept[attempt.ProviderKey].body, &intent))
			fake.mu.Unlock()
			deliver := func() {
				if d := e.do(stripeEvent(t, "evt_3ds", "payment_intent.succeeded", intent)); d.Status != http.StatusOK {
					t.Fatalf("the webhook: %d %s", d.Status, d.Body)
				}
			}
			if webhookFirst {
				deliver()
			}
			if state := e.attemptState(token, orderID); state != models.Succeeded {
				t.Fatalf("on the return the attempt is %q, want succeeded", state)
			}
			if !webhookFirst {
				deliver()
			}
			if fake.charges() != 1 || e.count("payments", "status = ?", "succeeded") != 1 || e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 {
				t.Fatalf("%d PaymentIntents, %d succeeded payments: want 1, 1 and the order paid", fake.charges(), e.count("payments", "status = ?", "succeeded"))
			}
		})
	}
}

// Against a fake Stripe, which never expires a PaymentIntent on its own: an
// authentication nobody completes is cancelled at Stripe by the reconciler
// once PAYMENT_AUTH_EXPIRY has passed, and settled declined; the order is
// payable again, and another card pays it once.
func TestStripeAbandonedAuthenticationIsCancelled(t *testing.T) {
	const expiry = time.Minute
	fake, base := newFakeStripe(t)
	e := newEnv(t, withStripe(base, http.DefaultTransport), func(d *setup) { d.AuthExpiry = expiry })
	token := e.signUp("stripe-3ds-abandon@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	e.payToAuthenticate(token, orderID, "k1")
	e.clock.Advance(expiry + time.Second)
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("the reconciler resolved %d (%v), want 1", n, err)
	}
	var attempt models.PaymentAttempt
	must(t, e.db.Where("order_id = ?", orderID).Take(&attempt).Error)
	fake.mu.Lock()
	cancelled := strings.Contains(string(fake.kept[attempt.ProviderKey].body), `"status":"canceled"`)
	fake.mu.Unlock()
	if attempt.State != models.Declined || !cancelled {
		t.Fatalf("after the expiry the attempt is %q, the PaymentIntent cancelled %v; want declined, true", attempt.State, cancelled)
	}
	if r := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("another card: %d %s", r.Status, r.Body)
	}
	if e.count("payments", "status = ?", "succeeded") != 1 || e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 {
		t.Fatal("want the order paid once")
	}
}
