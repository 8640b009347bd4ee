package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// paidOrder signs up, places an order of $19.00 (one product priced 1900)
// and pays it with method; it returns the token and the order. The user is
// staff, so that the same token also refunds the order (refunds are staff
// only: a shopper's token is refused, TestShoppersAreRefusedEveryStaffRoute).
func (e *env) paidOrder(email, method string) (string, string) {
	e.t.Helper()
	token := e.signUp(email)
	e.makeStaff(email)
	orderID := e.createOrder(token, "order-"+email, orderBody(e.productPriced(1900), 1))
	if r := e.do(e.payRequest(token, orderID, "pay-"+email, method)); r.Status != http.StatusCreated {
		e.t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	return token, orderID
}

func (e *env) refundRequest(token, orderID, k, body string) request {
	return request{method: "POST", path: "/api/v1/orders/" + orderID + "/refunds", token: token, key: key(k), body: body}
}

// refunded counts the provider's own refunds that gave money back, and their sum.
func (e *env) refunded() (int64, int64) {
	e.t.Helper()
	var sum int64
	if err := e.db.Table("simulated_refunds").Where("status = ?", models.Succeeded).Select("COALESCE(SUM(amount_cents), 0)").Scan(&sum).Error; err != nil {
		e.t.Fatal(err)
	}
	return e.count("simulated_refunds", "status = ?", models.Succeeded), sum
}

func (e *env) orderJSON(token, orderID string) map[string]any {
	e.t.Helper()
	return e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token}).json(e.t)
}

// Partial refunds add up to the charge: each is 201 with its Location, and
// GET there answers the same resource; the order goes partially_refunded,
// then refunded; a refund beyond what remains is 409 and refunds nothing.
// The same key replays; the same key with another amount is a mismatch.
func TestRefundsAddUpToTheChargeAndNoMore(t *testing.T) {
	e := newEnv(t)
	token, orderID := e.paidOrder("refunds@example.com", payments.MethodVisa)
	first := e.do(e.refundRequest(token, orderID, "r1", `{"amount_cents":500,"reason":"one arrived broken"}`))
	if first.Status != http.StatusCreated || first.json(t)["status"] != "succeeded" || first.json(t)["amount_cents"] != 500.0 {
		t.Fatalf("partial refund: %d %s", first.Status, first.Body)
	}
	got := e.do(request{method: "GET", path: first.Header.Get("Location"), token: token})
	if got.Status != http.StatusOK || got.json(t)["id"] != first.json(t)["id"] {
		t.Fatalf("GET %s: %d %s", first.Header.Get("Location"), got.Status, got.Body)
	}
	if again := e.do(e.refundRequest(token, orderID, "r1", `{"amount_cents":500,"reason":"one arrived broken"}`)); again.Status != http.StatusCreated || !again.replayed() {
		t.Fatalf("the same key again: %d replayed=%v", again.Status, again.replayed())
	}
	isProblem(t, e.do(e.refundRequest(token, orderID, "r1", `{"amount_cents":600}`)), http.StatusUnprocessableEntity, "/problems/idempotency-key-reused")
	if o := e.orderJSON(token, orderID); o["status"] != models.OrderPartiallyRefunded || o["refunded_cents"] != 500.0 || len(o["refunds"].([]any)) != 1 {
		t.Fatalf("after a partial refund: %v", o)
	}
	isProblem(t, e.do(e.refundRequest(token, orderID, "r2", `{"amount_cents":1401}`)), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if r := e.do(e.refundRequest(token, orderID, "r3", `{}`)); r.Status != http.StatusCreated || r.json(t)["amount_cents"] != 1400.0 {
		t.Fatalf("the rest: %d %s", r.Status, r.Body)
	}
	isProblem(t, e.do(e.refundRequest(token, orderID, "r4", `{"amount_cents":1}`)), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if o := e.orderJSON(token, orderID); o["status"] != models.OrderRefunded || o["refunded_cents"] != 1900.0 {
		t.Fatalf("after refunds adding up to the charge: %v", o)
	}
	if n, sum := e.refunded(); n != 2 || sum != 1900 {
		t.Fatalf("the provider's ledger: %d refunds of %d cents; want 2 of 1900", n, sum)
	}
}

// Refusals write nothing: an unpaid order, a bad amount, an unknown field,
// a long reason, an order that does not exist, a shopper's token.
func TestRefundRefusalsWriteNothing(t *testing.T) {
	e := newEnv(t)
	token, paid := e.paidOrder("owner@example.com", payments.MethodVisa)
	unpaid := e.createOrder(token, "unpaid", orderBody(e.products()[0], 1))
	other := e.signUp("other@example.com")
	long := fmt.Sprintf(`{"reason":%q}`, strings.Repeat("x", 201))
	for _, c := range []struct {
		name, token, order, body, typ string
		status                        int
	}{
		{"unpaid", token, unpaid, `{}`, "/problems/order-not-paid", 409},
		{"zero", token, paid, `{"amount_cents":0}`, "/problems/validation", 422},
		{"negative", token, paid, `{"amount_cents":-5}`, "/problems/validation", 422},
		{"not an integer", token, paid, `{"amount_cents":12.5}`, "/problems/validation", 422},
		{"a string", token, paid, `{"amount_cents":"12"}`, "/problems/validation", 422},
		{"unknown field", token, paid, `{"amount":100}`, "/problems/validation", 422},
		{"reason too long", token, paid, long, "/problems/validation", 422},
		{"no such order", token, "00000000-0000-4000-8000-000000000000", `{}`, "/problems/not-found", 404},
		{"a shopper's", other, paid, `{}`, "/problems/forbidden", 403},
	} {
		r := e.refundRequest(c.token, c.order, "k-"+strings.ReplaceAll(c.name, " ", "-"), c.body)
		r.offContract = c.status == http.StatusUnprocessableEntity // each breaks the document on purpose
		isProblem(t, e.do(r), c.status, c.typ)
		if n := e.count("refunds"); n != 0 {
			t.Fatalf("%s: %d refunds written", c.name, n)
		}
	}
	if n := e.count("simulated_refunds"); n != 0 {
		t.Fatalf("%d refunds at the provider", n)
	}
}

// Twenty refunds of the whole charge, with twenty keys, at once, at one
// instance and then spread over two: one is 201, and the provider's ledger
// shows one refund.
func TestTwentyRefundsAtOnceRefundOnce(t *testing.T) {
	for _, instances := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			e := newEnv(t)
			token, orderID := e.paidOrder("twenty@example.com", payments.MethodVisa)
			urls := []string{e.url}
			if instances == 2 {
				other := httptest.NewServer(newServer(t, e.deps))
				t.Cleanup(other.Close)
				urls = append(urls, other.URL)
			}
			answers := make([]response, 20)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() {
					at := *e
					at.url = urls[i%len(urls)]
					<-start
					r, err := at.send(e.refundRequest(token, orderID, fmt.Sprintf("r%d", i), `{}`))
					if err != nil {
						t.Error(err)
					}
					answers[i] = r
				})
			}
			close(start)
			wg.Wait()
			created := 0
			for _, r := range answers {
				switch {
				case r.Status == http.StatusCreated:
					created++
				case r.Status != http.StatusConflict:
					t.Fatalf("a refund answered %d %s", r.Status, r.Body)
				}
			}
			if n, sum := e.refunded(); created != 1 || n != 1 || sum != 1900 {
				t.Fatalf("%d answered 201; the provider refunded %d times, %d cents; want 1, 1, 1900", created, n, sum)
			}
		})
	}
}

// A refund whose provider refuses to send the money (the card's account is
// closed) is 409 refund-failed, final: replayed for its key, nothing given
// back, and the amount can still be refunded.
func TestAFailedRefundGivesNothingBack(t *testing.T) {
	e := newEnv(t)
	token, orderID := e.paidOrder("closed@example.com", payments.MethodRefundFail)
	r := e.do(e.refundRequest(token, orderID, "r1", `{}`))
	isProblem(t, r, http.StatusConflict, "/problems/refund-failed")
	if again := e.do(e.refundRequest(token, orderID, "r1", `{}`)); again.Status != http.StatusConflict || !again.replayed() {
		t.Fatalf("the same key again: %d replayed=%v", again.Status, again.replayed())
	}
	if o := e.orderJSON(token, orderID); o["status"] != models.OrderPaid || o["refunded_cents"] != 0.0 || len(o["refunds"].([]any)) != 0 {
		t.Fatalf("after a failed refund: %v", o)
	}
	if n, _ := e.refunded(); n != 0 || e.count("simulated_refunds", "status = ?", models.Failed) != 1 {
		t.Fatalf("the provider's ledger: %d refunds given back; want none, and one failed", n)
	}
	wantEventPerFact(t, e.db, outbox.OrderRefundFailed, 1)
}

// lostRefund loses the provider's reply to the first n refunds, after the
// provider made them.
type lostRefund struct {
	payments.Provider
	mu sync.Mutex
	n  int
}

func (p *lostRefund) Refund(ctx context.Context, req payments.RefundRequest) (payments.RefundAnswer, error) {
	answer, err := p.Provider.Refund(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.n > 0 {
		p.n--
		return payments.RefundAnswer{}, errors.New("read: connection reset by peer")
	}
	return answer, err
}

// A refund whose reply is lost stays in doubt: a refund with another key is
// not sent before it is resolved under its own key, and then finds nothing
// left to refund; the reconciler records it when nobody retries; the first
// key's retry gets its 201. The provider refunded once.
func TestARefundInDoubtIsResolvedBeforeAnother(t *testing.T) {
	lost := &lostRefund{n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("lost-refund@example.com", payments.MethodVisa)
	first := e.refundRequest(token, orderID, "r1", `{}`)
	isProblem(t, e.do(first), http.StatusBadGateway, "/problems/refund-unconfirmed")
	if n := e.count("refunds", "state = ?", models.InDoubt); n != 1 {
		t.Fatalf("%d refunds in doubt, want 1", n)
	}
	isProblem(t, e.do(e.refundRequest(token, orderID, "r2", `{}`)), http.StatusConflict, "/problems/refund-exceeds-refundable")
	if n, sum := e.refunded(); n != 1 || sum != 1900 {
		t.Fatalf("the provider refunded %d times, %d cents; want once", n, sum)
	}
	retry := e.do(first)
	if retry.Status != http.StatusCreated || retry.replayed() {
		t.Fatalf("the first key's retry: %d %s", retry.Status, retry.Body)
	}
	if o := e.orderJSON(token, orderID); o["status"] != models.OrderRefunded || o["refunded_cents"] != 1900.0 {
		t.Fatalf("the order: %v", o)
	}
}

// Nobody retries a refund in doubt: the reconciler records it.
func TestTheReconcilerRecordsARefundInDoubt(t *testing.T) {
	lost := &lostRefund{n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("reconciled-refund@example.com", payments.MethodVisa)
	isProblem(t, e.do(e.refundRequest(token, orderID, "r1", `{"amount_cents":700}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want the refund resolved", n, err)
	}
	if o := e.orderJSON(token, orderID); o["status"] != models.OrderPartiallyRefunded || o["refunded_cents"] != 700.0 {
		t.Fatalf("the order: %v", o)
	}
	if n, sum := e.refunded(); n != 1 || sum != 700 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 700", n, sum)
	}
	wantEventPerFact(t, e.db, outbox.OrderRefunded, 1)
}

// productPriced is the id of the catalog's product at that price.
func (e *env) productPriced(cents int64) string {
	e.t.Helper()
	var id string
	if err := e.db.Model(&models.Product{}).Where("price_cents = ?", cents).Pluck("id", &id).Error; err != nil || id == "" {
		e.t.Fatalf("no product at %d cents: %v", cents, err)
	}
	return id
}
