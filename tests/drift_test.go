package tests

// The places where the refund protocol had drifted from the payment's,
// before the two became one (billing's flow): each test failed on the code
// of the two copies.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// unavailableRefund turns the first n refund requests away, before the
// provider is reached: nothing given back.
type unavailableRefund struct {
	payments.Provider
	mu sync.Mutex
	n  int
}

func (p *unavailableRefund) Refund(ctx context.Context, req payments.RefundRequest) (payments.RefundAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n > 0 {
		p.n--
		return payments.RefundAnswer{}, fmt.Errorf("%w: 503 Service Unavailable", payments.ErrUnavailable)
	}
	return p.Provider.Refund(ctx, req)
}

// A refund the provider turned away for now is recorded failed with the
// reason that it was unavailable — not that it refused the refund, which
// is the final answer of another case — and the same key's retry refunds.
func TestARefundTurnedAwayIsRecordedAsUnavailable(t *testing.T) {
	away := &unavailableRefund{n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { away.Provider = p; return away }))
	token, orderID := e.paidOrder("refund-unavailable@example.com", payments.MethodVisa)
	refund := e.refundRequest(token, orderID, "r1", `{}`)
	isProblem(t, e.do(refund), http.StatusBadGateway, "/problems/payment-provider-unavailable")
	var failed models.Refund
	if err := e.db.Where("state = ?", models.Failed).Take(&failed).Error; err != nil {
		t.Fatal(err)
	}
	if reason := strings.ToLower(failed.FailureReason); !strings.Contains(reason, "unavailable") || strings.Contains(reason, "refused") {
		t.Fatalf("the refund turned away is recorded with %q; want that the provider was unavailable", failed.FailureReason)
	}
	if r := e.do(refund); r.Status != http.StatusCreated {
		t.Fatalf("the retry: %d %s", r.Status, r.Body)
	}
	if n, sum := e.refunded(); n != 1 || sum != 1900 {
		t.Fatalf("the provider refunded %d times, %d cents; want once", n, sum)
	}
}

// A refund that finds the order held by a live run, with a refund of it in
// doubt, is told a refund is being confirmed (as a payment is told of a
// payment), to retry: not that a payment is in progress.
func TestARefundBehindARefundInDoubtIsToldSo(t *testing.T) {
	lost := &lostRefund{n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("refund-busy@example.com", payments.MethodVisa)
	isProblem(t, e.do(e.refundRequest(token, orderID, "r1", `{"amount_cents":500}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	until := e.clock.Now().Add(time.Minute)
	if err := e.db.Model(&models.Order{}).Where("id = ?", orderID).Updates(map[string]any{"held_by": "reconciler/live", "held_until": until}).Error; err != nil {
		t.Fatal(err)
	}
	r := e.do(e.refundRequest(token, orderID, "r2", `{"amount_cents":500}`))
	isProblem(t, r, http.StatusConflict, "/problems/payment-in-progress")
	if detail, _ := r.field("detail"); !strings.Contains(detail, "refund") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("detail %q, Retry-After %q; want a refund being confirmed, and when to retry", detail, r.Header.Get("Retry-After"))
	}
	if n := e.count("refunds"); n != 1 {
		t.Fatalf("%d refunds recorded; want only the one in doubt", n)
	}
}

// A refund left in doubt and resolved, succeeded, by another key's refund
// between its retry's first look for its own answer and its begin, is that
// retry's answer: 201, not "nothing left to refund" — as a payment's retry
// finds its own charge when the order was paid meanwhile.
func TestARefundResolvedByAnotherKeyIsItsRetrysAnswer(t *testing.T) {
	lost := &lostRefund{n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("refund-resolved-meanwhile@example.com", payments.MethodVisa)
	first := e.refundRequest(token, orderID, "r1", `{}`)
	isProblem(t, e.do(first), http.StatusBadGateway, "/problems/refund-unconfirmed")

	// Once the retry has looked for its own refund (found none: it is in
	// doubt), another key's refund resolves it before the retry goes on.
	var armed atomic.Bool
	var other response
	err := e.db.Callback().Query().After("gorm:query").Register("test:resolve-meanwhile", func(db *gorm.DB) {
		if db.Statement.Table == "refunds" && strings.Contains(db.Statement.SQL.String(), "derived_key") && armed.CompareAndSwap(true, false) {
			other = e.do(e.refundRequest(token, orderID, "r2", `{}`))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.db.Callback().Query().Remove("test:resolve-meanwhile") })
	armed.Store(true)
	retry := e.do(first)
	if retry.Status != http.StatusCreated || retry.replayed() {
		t.Fatalf("the first key's retry: %d %s; want its refund, 201", retry.Status, retry.Body)
	}
	isProblem(t, other, http.StatusConflict, "/problems/refund-exceeds-refundable")
	if n, sum := e.refunded(); n != 1 || sum != 1900 {
		t.Fatalf("the provider refunded %d times, %d cents; want once", n, sum)
	}
}

// Two failed full refunds of one charge, both reported succeeded later by
// the provider: the provider's word is recorded, but the order never shows
// more given back than it was charged. The second is recorded as excess,
// for staff, logged and counted.
func TestLateRefundsNeverGiveBackMoreThanTheCharge(t *testing.T) {
	e := newEnv(t)
	token, orderID := e.paidOrder("late-refunds@example.com", payments.MethodRefundFail)
	for _, k := range []string{"r1", "r2"} {
		isProblem(t, e.do(e.refundRequest(token, orderID, k, `{}`)), http.StatusConflict, "/problems/refund-failed")
	}
	var failed []models.Refund
	if err := e.db.Where("state = ?", models.Failed).Order("created_at, id").Find(&failed).Error; err != nil || len(failed) != 2 {
		t.Fatalf("%d failed refunds, %v; want 2", len(failed), err)
	}
	for i, r := range failed {
		event := payments.Event{ID: fmt.Sprintf("evt_late_%d", i), ProviderKey: r.ProviderKey,
			Refund: &payments.RefundAnswer{ID: fmt.Sprintf("re_late_%d", i), State: models.Succeeded}}
		err := e.db.Transaction(func(tx *gorm.DB) error {
			applied, err := e.server.Payments().ApplyEvent(context.Background(), func() *gorm.DB { return tx }, event)
			if err == nil && !applied {
				err = fmt.Errorf("event %d not applied", i)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var order models.Order
	if err := e.db.Where("id = ?", orderID).Take(&order).Error; err != nil {
		t.Fatal(err)
	}
	if order.RefundedCents != 1900 || order.Status != models.OrderRefunded {
		t.Fatalf("the order: %s, %d cents given back; want refunded, 1900", order.Status, order.RefundedCents)
	}
	if n, excess := e.count("refunds", "state = ?", models.Succeeded), e.count("refunds", "state = ?", models.Excess); n != 1 || excess != 1 {
		t.Fatalf("%d refunds succeeded, %d excess; want one of each", n, excess)
	}
	metrics := string(e.do(request{method: "GET", path: "/metrics"}).Body)
	if !strings.Contains(metrics, `shop_payment_resolutions_total{by="webhook",outcome="late_refund_excess"} 1`) ||
		!strings.Contains(metrics, `shop_payment_resolutions_total{by="webhook",outcome="late_refund"} 1`) {
		t.Fatal("the late refund and the excess one are not counted once each")
	}
}

// A late report that a failed refund succeeded, while another refund of the
// charge is still in doubt, waits for the provider's next delivery: decided
// on settled facts, it is counted once that one has failed, and not
// recorded as excess against money that was never given back.
func TestALateRefundWaitsForTheChargesOtherRefunds(t *testing.T) {
	lost := &lostRefund{}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("late-refund-waits@example.com", payments.MethodRefundFail)
	isProblem(t, e.do(e.refundRequest(token, orderID, "r1", `{}`)), http.StatusConflict, "/problems/refund-failed")
	lost.mu.Lock()
	lost.n = 1
	lost.mu.Unlock()
	isProblem(t, e.do(e.refundRequest(token, orderID, "r2", `{}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	var first models.Refund
	if err := e.db.Where("state = ?", models.Failed).Take(&first).Error; err != nil {
		t.Fatal(err)
	}
	late := payments.Event{ID: "evt_late", ProviderKey: first.ProviderKey, Refund: &payments.RefundAnswer{ID: "re_late", State: models.Succeeded}}
	apply := func() (bool, error) {
		var applied bool
		err := e.db.Transaction(func(tx *gorm.DB) error {
			var err error
			applied, err = e.server.Payments().ApplyEvent(context.Background(), func() *gorm.DB { return tx }, late)
			return err
		})
		return applied, err
	}
	if applied, err := apply(); applied || !errors.Is(err, models.ErrPaymentInProgress) {
		t.Fatalf("the late report with a refund in doubt: applied %v, %v; want it to wait", applied, err)
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want the refund in doubt resolved", n, err)
	}
	if applied, err := apply(); !applied || err != nil {
		t.Fatalf("the late report again: applied %v, %v", applied, err)
	}
	var order models.Order
	if err := e.db.Where("id = ?", orderID).Take(&order).Error; err != nil {
		t.Fatal(err)
	}
	if order.RefundedCents != 1900 || e.count("refunds", "state = ?", models.Excess) != 0 ||
		e.count("refunds", "id = ? AND state = ? AND provider_refund_id = ?", first.ID, models.Succeeded, "re_late") != 1 {
		t.Fatalf("the order: %d cents given back, %d excess; want the late refund counted, with its provider id", order.RefundedCents, e.count("refunds", "state = ?", models.Excess))
	}
}

// A refund of more than is left while another refund of the order is still
// pending is refused for now, not finally: the pending one may fail and give
// its amount back, and then the same key's retry refunds.
func TestARefundBeyondAPendingRefundIsRefusedForNow(t *testing.T) {
	fake, base := newFakeStripe(t)
	fake.refundStatus = "pending"
	e := newEnv(t, withWebhookSecret(), withStripe(base, http.DefaultTransport))
	token, orderID, total := paidStripeOrder(t, e, "refund-beyond-pending@example.com")
	if r := e.do(e.stripeRefundRequest(token, orderID, "r1", 0)); r.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	second := e.stripeRefundRequest(token, orderID, "r2", 0)
	isProblem(t, e.do(second), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if again := e.do(second); again.replayed() {
		t.Fatal("the refusal was stored as final while the first refund is pending")
	}
	var first models.Refund
	if err := e.db.Take(&first).Error; err != nil {
		t.Fatal(err)
	}
	applyOnce(t, e, stripeEvent(t, "evt_first_failed", stripe.EventTypeRefundFailed, stripeRefundObject(first, "failed")))
	fake.refundStatus = "succeeded"
	if r := e.do(second); r.Status != http.StatusCreated || r.replayed() {
		t.Fatalf("the second key's retry once the first failed: %d %s", r.Status, r.Body)
	}
	orderRefunded(t, e, orderID, "refunded", total)
}
