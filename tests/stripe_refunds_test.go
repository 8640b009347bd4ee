package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// stripeRefundRequest refunds amount cents of an order (everything still
// refundable when amount is 0) under the key k.
func (e *env) stripeRefundRequest(token, orderID, k string, amount int64) request {
	body := `{}`
	if amount > 0 {
		body = fmt.Sprintf(`{"amount_cents":%d}`, amount)
	}
	return request{method: "POST", path: "/api/v1/orders/" + orderID + "/refunds", token: token, key: key(k), body: body}
}

// paidStripeOrder is a user's order paid through the shop's Stripe
// provider, and its total.
func paidStripeOrder(t *testing.T, e *env, email string) (string, string, int64) {
	t.Helper()
	token := e.signUp(email)
	e.makeStaff(email) // so that the token also refunds the order, as paidOrder's
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 2))
	if r := e.do(e.payRequest(token, orderID, "pay", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	var total int64
	e.db.Table("orders").Where("id = ?", orderID).Pluck("total_cents", &total)
	return token, orderID, total
}

// orderRefunded checks the order's status and refunded_cents.
func orderRefunded(t *testing.T, e *env, orderID, status string, cents int64) {
	t.Helper()
	if e.count("orders", "id = ? AND status = ? AND refunded_cents = ?", orderID, status, cents) != 1 {
		var got struct {
			Status        string
			RefundedCents int64
		}
		e.db.Table("orders").Where("id = ?", orderID).Select("status, refunded_cents").Scan(&got)
		t.Fatalf("order %+v; want %s with %d cents refunded", got, status, cents)
	}
}

// With PAYMENT_PROVIDER=stripe against stripe-mock, a partial refund and
// then the rest get 201, and each is one POST /v1/refunds of the
// PaymentIntent with the amount, the refund's derived key as Stripe's
// Idempotency-Key and the order and key in its metadata — parameters
// stripe-mock checked against Stripe's specification.
func TestStripeRefundsThroughStripeMock(t *testing.T) {
	rec := &recording{}
	e := newEnv(t, withStripe(startStripeMock(t, true), rec))
	token, orderID, total := paidStripeOrder(t, e, "stripe-refund@example.com")
	var chargeID string
	e.db.Table("payments").Pluck("provider_charge_id", &chargeID)

	partial := e.stripeRefundRequest(token, orderID, "r1", 100)
	for i, req := range []request{partial, e.stripeRefundRequest(token, orderID, "r2", 0)} {
		r := e.do(req)
		if r.Status != http.StatusCreated || r.json(t)["status"] != "succeeded" {
			t.Fatalf("refund %d through stripe-mock: %d %s", i+1, r.Status, r.Body)
		}
		if loc := r.Header.Get("Location"); !strings.HasPrefix(loc, "/api/v1/orders/"+orderID+"/refunds/") {
			t.Fatalf("Location %q", loc)
		}
	}
	if again := e.do(partial); again.Status != http.StatusCreated || !again.replayed() {
		t.Fatalf("the partial refund again: %d replayed=%v", again.Status, again.replayed())
	}
	orderRefunded(t, e, orderID, "refunded", total)
	var refunds []models.Refund
	e.db.Order("amount_cents").Find(&refunds)
	calls := rec.all()[1:] // after the charge
	if len(refunds) != 2 || len(calls) != 2 || refunds[0].AmountCents != 100 || refunds[1].AmountCents != total-100 {
		t.Fatalf("%d refunds %+v, %d requests to Stripe %+v; want 100 and %d, one request each", len(refunds), refunds, len(calls), calls, total-100)
	}
	for i, c := range calls {
		r := refunds[i]
		if r.AmountCents == 100 != (i == 0) {
			r = refunds[1-i]
		}
		want := url.Values{"payment_intent": {chargeID}, "amount": {fmt.Sprint(r.AmountCents)}, "metadata[order_id]": {orderID}, "metadata[idempotency_key]": {r.ProviderKey}}
		if c.method != "POST" || c.path != "/v1/refunds" || c.idempotencyKey != r.ProviderKey || c.status != http.StatusOK || c.form.Encode() != want.Encode() {
			t.Fatalf("request %s %s Idempotency-Key %q form %v answered %d; want POST /v1/refunds under %q with %v, 200", c.method, c.path, c.idempotencyKey, c.form, c.status, r.ProviderKey, want)
		}
		if r.State != models.Succeeded || !strings.HasPrefix(r.ProviderRefundID, "re_") {
			t.Fatalf("refund %+v, want succeeded with Stripe's refund id", r)
		}
	}
}

// A refund retried with its key, and sent twice at once, is one refund in
// Stripe's ledger; a new key is then told nothing is left to refund.
func TestStripeRetriedRefundIsRefundedOnce(t *testing.T) {
	fake, base := newFakeStripe(t)
	e := newEnv(t, withStripe(base, http.DefaultTransport))
	token, orderID, total := paidStripeOrder(t, e, "stripe-refund-retry@example.com")
	refund := e.stripeRefundRequest(token, orderID, "r1", 0)
	created := 0
	for _, r := range append(e.concurrently([]request{refund, refund}), e.do(refund)) {
		if r.Status == http.StatusCreated {
			created++
		} else if r.Status != http.StatusConflict {
			t.Fatalf("a delivery of the refund: %d %s", r.Status, r.Body)
		}
	}
	if created < 2 {
		t.Fatalf("%d of 3 deliveries got the 201, want the retry at least", created)
	}
	isProblem(t, e.do(e.stripeRefundRequest(token, orderID, "r2", 0)), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if fake.refunds() != 1 || e.count("refunds") != 1 {
		t.Fatalf("%d refunds at Stripe, %d recorded; want 1, 1", fake.refunds(), e.count("refunds"))
	}
	orderRefunded(t, e, orderID, "refunded", total)
}

// 20 refunds of the whole order under 20 keys at once: exactly one gets
// 201, and Stripe's ledger shows one refund.
func TestStripeConcurrentRefundsRefundOnce(t *testing.T) {
	fake, base := newFakeStripe(t)
	e := newEnv(t, withStripe(base, http.DefaultTransport))
	token, orderID, total := paidStripeOrder(t, e, "stripe-refund-race@example.com")
	reqs := make([]request, 20)
	for i := range reqs {
		reqs[i] = e.stripeRefundRequest(token, orderID, fmt.Sprintf("race-%d", i), 0)
	}
	created := 0
	for _, r := range e.concurrently(reqs) {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Fatalf("a refund got %d %s", r.Status, r.Body)
		}
	}
	if created != 1 || fake.refunds() != 1 || e.count("refunds", "state = ?", models.Succeeded) != 1 {
		t.Fatalf("%d refunds got 201, %d at Stripe, %d recorded succeeded; want 1, 1, 1", created, fake.refunds(), e.count("refunds", "state = ?", models.Succeeded))
	}
	orderRefunded(t, e, orderID, "refunded", total)
}

// lostStripeRefund is a paid order on a fake Stripe whose answer to the
// next request is lost after it was carried out. The pay request's
// connection is closed first: net/http sends a request with an
// Idempotency-Key again by itself when a reused connection dies before
// answering, which would hide the loss.
func lostStripeRefund(t *testing.T, email string) (*fakeStripe, *env, string, string, int64) {
	t.Helper()
	fake, base := newFakeStripe(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	e := newEnv(t, withStripe(base, transport))
	token, orderID, total := paidStripeOrder(t, e, email)
	transport.CloseIdleConnections()
	fake.mu.Lock()
	fake.loseN = 1
	fake.mu.Unlock()
	return fake, e, token, orderID, total
}

// A refund whose answer was lost stays in doubt. Within the roll-forward
// window a new key first sends it again under its own key — Stripe replays
// the first refund — and is told nothing is left; the first key's retry
// gets its 201. One refund in Stripe's ledger.
func TestStripeLostRefundReplyIsResolvedUnderItsOwnKey(t *testing.T) {
	fake, e, token, orderID, total := lostStripeRefund(t, "stripe-refund-lost@example.com")
	first := e.stripeRefundRequest(token, orderID, "r1", 0)
	isProblem(t, e.do(first), http.StatusBadGateway, "/problems/refund-unconfirmed")
	if fake.refunds() != 1 || e.count("refunds", "state = ?", models.InDoubt) != 1 {
		t.Fatalf("after the lost answer: %d refunds at Stripe, %d in doubt; want 1, 1", fake.refunds(), e.count("refunds", "state = ?", models.InDoubt))
	}
	isProblem(t, e.do(e.stripeRefundRequest(token, orderID, "r2", 0)), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if r := e.do(first); r.Status != http.StatusCreated || r.json(t)["status"] != "succeeded" {
		t.Fatalf("the first key's retry: %d %s; want 201", r.Status, r.Body)
	}
	if fake.refunds() != 1 || e.count("refunds") != 1 || e.count("refunds", "state = ? AND provider_refund_id = ?", models.Succeeded, "re_fake1") != 1 {
		t.Fatalf("%d refunds at Stripe, %d recorded; want re_fake1 once", fake.refunds(), e.count("refunds"))
	}
	orderRefunded(t, e, orderID, "refunded", total)
}

// Past the roll-forward window, and after Stripe forgot the key, a refund
// in doubt is looked up among the PaymentIntent's refunds by the key in
// its metadata, never sent again: the reconciler records the first refund.
func TestStripeRefundOlderThanItsKeyIsLookedUpNotSentAgain(t *testing.T) {
	fake, e, token, orderID, total := lostStripeRefund(t, "stripe-refund-day@example.com")
	isProblem(t, e.do(e.stripeRefundRequest(token, orderID, "r1", 0)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	e.clock.Advance(25 * time.Hour)
	fake.forget()
	if n, err := e.server.Payments().Reconcile(t.Context()); err != nil || n != 1 {
		t.Fatalf("reconcile a day later: %d resolved, %v; want 1", n, err)
	}
	if fake.refunds() != 1 || e.count("refunds", "state = ? AND provider_refund_id = ?", models.Succeeded, "re_fake1") != 1 {
		t.Fatalf("%d refunds at Stripe, %d recorded; want re_fake1 once", fake.refunds(), e.count("refunds"))
	}
	orderRefunded(t, e, orderID, "refunded", total)
}

// pendingStripeRefund is an order refunded in full through a Stripe that
// answers refunds "pending", and its refund.
func pendingStripeRefund(t *testing.T, email string) (*env, string, int64, models.Refund) {
	t.Helper()
	fake, base := newFakeStripe(t)
	fake.refundStatus = "pending"
	e := newEnv(t, withWebhookSecret(), withStripe(base, http.DefaultTransport))
	token, orderID, total := paidStripeOrder(t, e, email)
	if r := e.do(e.stripeRefundRequest(token, orderID, "r1", 0)); r.Status != http.StatusCreated || r.json(t)["status"] != "pending" {
		t.Fatalf("refund: %d %s; want 201 pending", r.Status, r.Body)
	}
	var refund models.Refund
	e.db.Take(&refund)
	if fake.refunds() != 1 || refund.State != models.Pending {
		t.Fatalf("%d refunds at Stripe, refund %+v; want one pending", fake.refunds(), refund)
	}
	orderRefunded(t, e, orderID, "refunded", total)
	return e, orderID, total, refund
}

func stripeRefundObject(r models.Refund, status string) map[string]any {
	return map[string]any{"id": r.ProviderRefundID, "object": "refund", "status": status, "amount": r.AmountCents, "currency": "usd",
		"payment_intent": r.ChargeID, "metadata": map[string]string{"idempotency_key": r.ProviderKey, "order_id": r.OrderID}}
}

// applyOnce delivers a signed event five times at once: one delivery runs
// and applies it, the others replay its stored answer.
func applyOnce(t *testing.T, e *env, event request) {
	t.Helper()
	fresh := 0
	for _, r := range e.concurrently([]request{event, event, event, event, event}) {
		if r.Status != http.StatusOK || r.json(t)["applied"] != true {
			t.Fatalf("a delivery got %d %s, want the applied answer", r.Status, r.Body)
		}
		if !r.replayed() {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d deliveries ran, want 1", fresh)
	}
}

// refund.updated reporting a pending refund succeeded, delivered five times
// at once, is applied once: the refund is succeeded, the order refunded.
func TestStripeRefundUpdatedWebhookSettlesAPendingRefund(t *testing.T) {
	e, orderID, total, refund := pendingStripeRefund(t, "stripe-refund-updated@example.com")
	applyOnce(t, e, stripeEvent(t, "evt_refund_updated", stripe.EventTypeRefundUpdated, stripeRefundObject(refund, "succeeded")))
	if e.count("refunds", "id = ? AND state = ?", refund.ID, models.Succeeded) != 1 || e.count("refunds") != 1 {
		t.Fatal("the refund is not succeeded, once")
	}
	orderRefunded(t, e, orderID, "refunded", total)
	// A late pending report of it changes nothing.
	late := e.do(stripeEvent(t, "evt_refund_late", stripe.EventTypeRefundUpdated, stripeRefundObject(refund, "pending")))
	if late.Status != http.StatusOK || late.json(t)["applied"] != false || e.count("refunds", "state = ?", models.Succeeded) != 1 {
		t.Fatalf("a late pending event: %d %s; want 200, not applied", late.Status, late.Body)
	}
	wantEventPerFact(t, e.db, outbox.OrderRefunded, 1)
}

// refund.failed (stripe-go's EventTypeRefundFailed) for a pending refund,
// delivered five times at once, is applied once: the refund failed,
// nothing was given back, and the order is paid again, its amount
// refundable.
func TestStripeRefundFailedWebhookGivesTheAmountBack(t *testing.T) {
	e, orderID, _, refund := pendingStripeRefund(t, "stripe-refund-failed@example.com")
	failed := stripeRefundObject(refund, "failed")
	failed["failure_reason"] = "expired_or_canceled_card"
	applyOnce(t, e, stripeEvent(t, "evt_refund_failed", stripe.EventTypeRefundFailed, failed))
	if e.count("refunds", "id = ? AND state = ?", refund.ID, models.Failed) != 1 {
		t.Fatal("the refund is not failed")
	}
	orderRefunded(t, e, orderID, "paid", 0)
	wantEventPerFact(t, e.db, outbox.OrderRefundFailed, 1)
}

// An event about a refund the shop never made, and charge.refunded (which
// carries the charge, not a refund the shop can match), are received (200)
// and not applied, and change nothing.
func TestStripeRefundWebhookForAnUnknownRefundIsNotApplied(t *testing.T) {
	e, orderID, total, refund := pendingStripeRefund(t, "stripe-refund-unknown@example.com")
	stranger := stripeRefundObject(refund, "succeeded")
	stranger["id"], stranger["metadata"] = "re_elsewhere", map[string]string{"idempotency_key": "made-in-the-dashboard"}
	charge := map[string]any{"id": "ch_refunded", "object": "charge", "amount_refunded": total, "refunded": true, "payment_intent": refund.ChargeID}
	for typ, object := range map[stripe.EventType]map[string]any{stripe.EventTypeRefundUpdated: stranger, stripe.EventTypeRefundFailed: stranger, stripe.EventTypeChargeRefunded: charge} {
		r := e.do(stripeEvent(t, "evt_unknown_"+string(typ), typ, object))
		if r.Status != http.StatusOK || r.json(t)["applied"] != false {
			t.Fatalf("%s for an unknown refund: %d %s; want 200, not applied", typ, r.Status, r.Body)
		}
	}
	if e.count("refunds", "id = ? AND state = ?", refund.ID, models.Pending) != 1 || e.count("refunds") != 1 {
		t.Fatal("the shop's own refund changed")
	}
	orderRefunded(t, e, orderID, "refunded", total)
}

// Stripe refusing the refund itself — the charge is already refunded (from
// the dashboard, say) — is a failed refund with Stripe's message: 409
// refund-failed, final for its key, nothing given back, the order still
// paid.
func TestStripeRefusedRefundIsAFailedRefund(t *testing.T) {
	fake, base := newFakeStripe(t)
	fake.refuseRefund = string(stripe.ErrorCodeChargeAlreadyRefunded)
	e := newEnv(t, withStripe(base, http.DefaultTransport))
	token, orderID, _ := paidStripeOrder(t, e, "stripe-refund-refused@example.com")
	refund := e.stripeRefundRequest(token, orderID, "r1", 0)
	r := e.do(refund)
	isProblem(t, r, http.StatusConflict, "/problems/refund-failed")
	if !strings.Contains(string(r.Body), "already been refunded") {
		t.Fatalf("the refusal %s does not carry Stripe's message", r.Body)
	}
	if again := e.do(refund); again.Status != http.StatusConflict || !again.replayed() {
		t.Fatalf("the refusal again: %d replayed=%v; want the stored 409", again.Status, again.replayed())
	}
	if fake.refunds() != 0 || e.count("refunds", "state = ?", models.Failed) != 1 || e.count("refunds") != 1 {
		t.Fatalf("%d refunds at Stripe, %d recorded; want none and one failed", fake.refunds(), e.count("refunds"))
	}
	orderRefunded(t, e, orderID, "paid", 0)
}
