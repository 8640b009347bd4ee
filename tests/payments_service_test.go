package tests

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop/shop/config"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// A correctly signed event of another Stripe API version gets 400 with its
// own problem type, not "signature invalid", and writes nothing.
func TestWebhookOfAnotherAPIVersionIsRefused(t *testing.T) {
	e, _, attempt := inDoubt(t)
	before := e.sideEffects()
	payload, err := json.Marshal(map[string]any{
		"id": "evt_old_version", "object": "event", "api_version": "2020-08-27", "type": stripe.EventTypePaymentIntentSucceeded,
		"created": time.Now().Unix(), "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": intentOf(attempt, "succeeded")},
	})
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: webhookSecret, Timestamp: time.Now()})
	r := e.do(request{method: "POST", path: "/webhooks/stripe", body: string(payload), header: http.Header{"Stripe-Signature": {signed.Header}}})
	isProblem(t, r, http.StatusBadRequest, "/problems/webhook-api-version")
	if got := e.sideEffects(); got != before {
		t.Fatalf("an event of another API version wrote %+v (before: %+v)", got, before)
	}
	if e.count("payment_attempts", "id = ? AND state = ?", attempt.ID, models.InDoubt) != 1 {
		t.Fatal("an event of another API version resolved the attempt")
	}
}

// payment_intent.succeeded after the shop recorded a decline: the provider's
// word wins. The charge is recorded (the declined payment becomes it, under
// the same id), the order paid, an ERROR logged and the late charge counted.
func TestWebhookRecordsAChargeAfterARecordedDecline(t *testing.T) {
	var logs testkit.Buffer
	e := newEnv(t, withWebhookSecret(), func(d *setup) { d.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	token := e.signUp("late-charge@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	declined := e.do(e.payRequest(token, orderID, "k1", payments.MethodChargeDeclined))
	isProblem(t, declined, http.StatusPaymentRequired, "/problems/payment-declined")
	var attempt models.PaymentAttempt
	if err := e.db.Take(&attempt, "order_id = ? AND state = ?", orderID, models.Declined).Error; err != nil {
		t.Fatal(err)
	}
	r := e.do(stripeEvent(t, "evt_late_after_decline", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded")))
	if r.Status != http.StatusOK || r.json(t)["applied"] != true {
		t.Fatalf("late charge: %d %s; want 200, applied", r.Status, r.Body)
	}
	order := e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token}).json(t)
	pays := order["payments"].([]any)
	if order["status"] != "paid" || len(pays) != 1 || pays[0].(map[string]any)["status"] != "succeeded" ||
		pays[0].(map[string]any)["provider_charge_id"] != "pi_webhook" || pays[0].(map[string]any)["id"] != declined.json(t)["payment"].(map[string]any)["id"] {
		t.Fatalf("the order after a late charge: %v; want paid, its one payment succeeded with the event's charge", order)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "recorded as declined") {
		t.Fatalf("no ERROR log for the late charge:\n%s", logs.String())
	}
	metrics := string(e.do(request{method: "GET", path: "/metrics"}).Body)
	if !strings.Contains(metrics, `shop_payment_resolutions_total{by="webhook",outcome="late_charge"} 1`) {
		t.Fatal("the late charge is not counted")
	}
}

// An event about an attempt a live payment run holds gets 409 (so that
// Stripe delivers it again), writes nothing, and is applied when it is
// delivered again once the hold is free.
func TestWebhookForAHeldAttemptIsAppliedOnRedelivery(t *testing.T) {
	e, orderID, attempt := inDoubt(t)
	live := "idem_live/run"
	until := e.clock.Now().Add(time.Hour)
	if err := e.db.Model(&models.Order{}).Where("id = ?", orderID).Updates(map[string]any{"held_by": live, "held_until": until}).Error; err != nil {
		t.Fatal(err)
	}
	before := e.sideEffects()
	event := stripeEvent(t, "evt_while_held", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded"))
	r := e.do(event)
	isProblem(t, r, http.StatusConflict, "/problems/payment-in-progress")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("the 409 has no Retry-After")
	}
	after := e.sideEffects()
	if after.orders != before.orders || after.payments != before.payments || after.charges != before.charges || after.storedKeys != before.storedKeys {
		t.Fatalf("an event for a held attempt wrote %+v (before: %+v)", after, before)
	}
	var held models.Order
	if err := e.db.Take(&held, "id = ?", orderID).Error; err != nil || held.HeldBy == nil || *held.HeldBy != live {
		t.Fatalf("the live run's hold: %v %v; want it kept", held.HeldBy, err)
	}
	if err := e.db.Model(&models.Order{}).Where("id = ?", orderID).Updates(map[string]any{"held_by": nil, "held_until": nil}).Error; err != nil {
		t.Fatal(err)
	}
	if r := e.do(event); r.Status != http.StatusOK || r.json(t)["applied"] != true {
		t.Fatalf("redelivery once the hold is free: %d %s; want 200, applied", r.Status, r.Body)
	}
	e.paidOnce("after the redelivery", orderID)
}

// Past the roll-forward window an attempt in doubt is looked up, never sent
// again: the reconciler charges nothing hours after the shopper gave up. An
// attempt the provider has no record of is settled failed, and the order
// page says that nothing was charged; one the provider charged is recorded.
func TestAttemptsPastTheRollForwardWindowAreLookedUpOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		charged bool
	}{{"never reached the provider", false}, {"charged, the reply lost", true}} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &failing{err: errors.New("write: broken pipe"), afterCharge: tc.charged, n: 1}
			e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
			s := e.shopper()
			s.signUp("roll-forward@example.com")
			orderPath := s.placeOrder(s.checkout(e.products()[0], 1))
			orderID := orderPath[strings.LastIndex(orderPath, "/")+1:]
			isPage(t, s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa)), http.StatusBadGateway)
			calls := e.provider.Calls()
			e.clock.Advance(config.Default().RollForward + time.Minute)
			if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
				t.Fatalf("reconcile: %d, %v; want the attempt resolved", n, err)
			}
			if got := e.provider.Calls(); got != calls {
				t.Fatalf("%d charge requests after the window, want none", got-calls)
			}
			if !tc.charged {
				if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.Failed); n != 1 || e.charges() != 0 {
					t.Fatalf("%d failed attempts, %d charges; want the attempt settled failed, nothing charged", n, e.charges())
				}
				isPage(t, s.get(orderPath), http.StatusOK, "nothing was charged")
				return
			}
			e.paidOnce("after the lookup", orderID)
			isPage(t, s.get(orderPath), http.StatusOK, "Paid.")
		})
	}
}

// Past the window, a lookup that finds nothing proves nothing while a
// request under the key may still be running or too recent for the
// provider's search — here one re-sent a minute ago: the attempt stays in
// doubt, and is settled failed only once that request is long over.
func TestALookupSoonAfterASendSettlesNothing(t *testing.T) {
	lost := &failing{err: errors.New("write: broken pipe"), n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token := e.signUp("late-send@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	e.clock.Advance(config.Default().RollForward + time.Minute)
	if err := e.db.Model(&models.PaymentAttempt{}).Where("order_id = ?", orderID).Update("sent_at", e.clock.Now().Add(-time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 0 {
		t.Fatalf("reconcile a minute after a send: %d resolved, %v; want none", n, err)
	}
	if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.InDoubt); n != 1 {
		t.Fatal("the attempt was settled although its last request may still be running")
	}
	e.clock.Advance(10 * time.Minute)
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile long after: %d resolved, %v; want the attempt settled", n, err)
	}
	if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.Failed); n != 1 || e.charges() != 0 {
		t.Fatal("the attempt is not settled failed, with nothing charged")
	}
}

// The gauge of attempts in doubt reads the shared database at each scrape:
// one attempt in doubt, and the age of the oldest; none once resolved.
func TestMetricsGaugeAttemptsInDoubt(t *testing.T) {
	e, _, _ := inDoubt(t)
	e.clock.Advance(90 * time.Second)
	metrics := string(e.do(request{method: "GET", path: "/metrics"}).Body)
	if age := gauge(metrics, "shop_payment_attempt_in_doubt_oldest_age_seconds"); !strings.Contains(metrics, "shop_payment_attempts_in_doubt 1\n") || age < 60 || age > 90 {
		t.Fatalf("/metrics lacks one attempt in doubt, 90 s old:\n%s", grepLines(metrics, "in_doubt"))
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v", n, err)
	}
	metrics = string(e.do(request{method: "GET", path: "/metrics"}).Body)
	if !strings.Contains(metrics, "shop_payment_attempts_in_doubt 0\n") || !strings.Contains(metrics, "shop_payment_attempt_in_doubt_oldest_age_seconds 0\n") {
		t.Fatalf("/metrics after the resolution:\n%s", grepLines(metrics, "in_doubt"))
	}
}

// gauge reads an unlabelled series' value from a /metrics page; -1 when absent.
func gauge(metrics, name string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func grepLines(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
