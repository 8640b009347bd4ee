package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop/shop/config"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// Pins: a resolution's re-send moves the attempt's last send. Planted: ask
// (billing/resolve.go) without its MarkSent before the re-send. Failed: "a
// lookup a minute after the re-send: 1 resolved, <nil>; want none" (the
// attempt, charged by the re-send, settled failed on the first send's
// time, a quarter of an hour old).
//
// An attempt in doubt is sent again by the reconciler just within the
// roll-forward window; the provider charges it and the reply is lost. A
// minute later, past the window, it is only looked up, and the provider's
// search does not show the charge yet: a lookup so soon after a send
// proves nothing, so the attempt stays in doubt, and a new key charges
// nothing. Once the search shows the charge, it is recorded, once.
func TestALookupSoonAfterAResolutionsResendSettlesNothing(t *testing.T) {
	script, provider := withScript(t, []fate{{lost: true}, {lost: true, reached: true}}, nil)
	provider.setLagging(true)
	e := newEnv(t, script)
	token := e.signUp("resend@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")

	e.clock.Advance(config.Default().RollForward - 30*time.Second)
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 0 {
		t.Fatalf("the re-send, its reply lost: %d resolved, %v; want none", n, err)
	}
	if e.charges() != 1 {
		t.Fatalf("%d charges; want the re-send's", e.charges())
	}
	e.clock.Advance(time.Minute)
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 0 {
		t.Fatalf("a lookup a minute after the re-send: %d resolved, %v; want none", n, err)
	}
	if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, stateInDoubt); n != 1 {
		t.Fatal("a lookup a minute after the re-send settled the attempt")
	}
	if r := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)); r.Status == http.StatusCreated || e.charges() != 1 {
		t.Fatalf("a new key while the attempt is in doubt: %d %s, %d charges; want no new charge", r.Status, r.Body, e.charges())
	}

	provider.setLagging(false)
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("once the search shows the charge: %d resolved, %v; want the attempt", n, err)
	}
	e.paidOnce("once the search caught up", orderID)
}

// Pins: a payment resolves at most three earlier attempts in doubt before
// it gives up. Planted: maxResolutions (billing/protocol.go) 4, then 2.
// Failed: with 4, "status 201, want 409" (four earlier attempts resolved,
// and the order charged); with 2, "with 3 earlier attempts: 409 …, 2
// settled failed; want 201, all 3".
//
// Attempts in doubt pile up only in a database written by hand (a payment
// makes none while one is in doubt): the test copies one. Each earlier
// attempt is sent again, and refused for good: nothing charged. With three
// of them, a payment resolves them and charges; with four, it resolves
// three, charges nothing and is told to retry, and its retry resolves the
// fourth and charges.
func TestAPaymentResolvesAtMostThreeEarlierAttempts(t *testing.T) {
	for _, earlier := range []int{3, 4} {
		t.Run(fmt.Sprintf("%d earlier", earlier), func(t *testing.T) {
			script, _ := withScript(t, []fate{{lost: true}}, nil)
			e := newEnv(t, script)
			token := e.signUp("resolutions@example.com")
			orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
			isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodUnavailable)), http.StatusBadGateway, "/problems/payment-unconfirmed")
			e.copyAttemptInDoubt(orderID, earlier-1)

			pay := e.payRequest(token, orderID, "k2", payments.MethodVisa)
			r := e.do(pay)
			failed := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, stateFailed)
			if earlier == 3 {
				if r.Status != http.StatusCreated || failed != 3 {
					t.Fatalf("with 3 earlier attempts: %d %s, %d settled failed; want 201, all 3", r.Status, r.Body, failed)
				}
				e.paidOnce("after three resolutions", orderID)
				return
			}
			isProblem(t, r, http.StatusConflict, "/problems/payment-in-progress")
			if doubts, attempts := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, stateInDoubt), e.count("payment_attempts"); failed != 3 || doubts != 1 || attempts != 4 || e.charges() != 0 {
				t.Fatalf("with 4 earlier attempts: %d settled failed, %d in doubt, %d attempts, %d charges; want 3, 1, 4, 0", failed, doubts, attempts, e.charges())
			}
			if again := e.do(pay); again.Status != http.StatusCreated {
				t.Fatalf("the retry: %d %s; want the fourth resolved and the order charged", again.Status, again.Body)
			}
			e.paidOnce("after the retry", orderID)
		})
	}
}

// copyAttemptInDoubt writes n more attempts in doubt of the order, copies
// of its one attempt under keys of their own, each made after the last.
func (e *env) copyAttemptInDoubt(orderID string, n int) {
	e.t.Helper()
	var attempt models.PaymentAttempt
	if err := e.db.Where("order_id = ? AND state = ?", orderID, stateInDoubt).Take(&attempt).Error; err != nil {
		e.t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		ghost := attempt
		ghost.ID = uuid.NewString()
		ghost.DerivedKey = fmt.Sprintf("ghost-%d", i)
		ghost.ProviderKey = ghost.DerivedKey
		ghost.CreatedAt = attempt.CreatedAt.Add(time.Duration(i) * time.Millisecond)
		if err := e.db.Create(&ghost).Error; err != nil {
			e.t.Fatal(err)
		}
	}
}
