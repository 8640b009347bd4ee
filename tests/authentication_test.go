package tests

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// payToAuthenticate pays the order with the card that asks to authenticate,
// and returns the 202 and the authentication page's path.
func (e *env) payToAuthenticate(token, orderID, k string) (response, string) {
	e.t.Helper()
	r := e.do(e.payRequest(token, orderID, k, payments.MethodAuthentication))
	if r.Status != http.StatusAccepted {
		e.t.Fatalf("pay with %s: %d %s, want 202", payments.MethodAuthentication, r.Status, r.Body)
	}
	v := r.json(e.t)
	next, _ := v["next_action"].(map[string]any)
	redirect, _ := next["redirect_to_url"].(map[string]any)
	page, _ := redirect["url"].(string)
	if v["status"] != "requires_action" || next["type"] != "redirect_to_url" || page == "" || redirect["return_url"] != "/orders/"+orderID {
		e.t.Fatalf("the 202: %s", r.Body)
	}
	return r, page
}

// authenticate answers the simulated provider's page as the shopper does.
func (e *env) authenticate(page, outcome string) {
	e.t.Helper()
	u, err := url.Parse(page)
	if err != nil {
		e.t.Fatal(err)
	}
	form := url.Values{"outcome": {outcome}, "return_url": {u.Query().Get("return_url")}}
	r := e.do(request{method: "POST", path: u.Path, body: form.Encode(), contentType: "application/x-www-form-urlencoded"})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != u.Query().Get("return_url") {
		e.t.Fatalf("%s the authentication: %d to %q", outcome, r.Status, r.Header.Get("Location"))
	}
}

func (e *env) attemptState(token, orderID string) models.State {
	e.t.Helper()
	r := e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token})
	attempts, _ := r.json(e.t)["attempts"].([]any)
	last, _ := attempts[len(attempts)-1].(map[string]any)
	state, _ := last["state"].(string)
	return models.State(state)
}

// While the shopper authenticates, a retry with the same key gets the same
// 202 byte for byte, and no second authentication; another key gets 409
// payment-in-progress with Retry-After. A double-click on Complete charges
// once, and the order's GET shows it paid.
func TestAuthenticationIsAskedOnceAndChargesOnce(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("auth-once@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	first, page := e.payToAuthenticate(token, orderID, "k1")

	again := e.do(e.payRequest(token, orderID, "k1", payments.MethodAuthentication))
	if again.Status != http.StatusAccepted || !again.replayed() || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("the retry: %d replayed=%v %s, want the same 202", again.Status, again.replayed(), again.Body)
	}
	other := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa))
	isProblem(t, other, http.StatusConflict, "/problems/payment-in-progress")
	if other.Header.Get("Retry-After") == "" {
		t.Fatal("the 409 has no Retry-After")
	}
	if n := e.count("simulated_charges"); n != 1 {
		t.Fatalf("%d requests at the provider while waiting, want 1", n)
	}
	if state := e.attemptState(token, orderID); state != models.RequiresAction {
		t.Fatalf("the order shows its attempt %q, want requires_action", state)
	}

	e.authenticate(page, "complete")
	e.authenticate(page, "complete")
	e.paidOnReturn(token, orderID, "after a double-click on Complete")
}

// paidOnReturn wants the order's attempt succeeded once the shopper is back
// from the authentication: the order paid, with one charge and one event.
func (e *env) paidOnReturn(token, orderID, when string) {
	e.t.Helper()
	if state := e.attemptState(token, orderID); state != models.Succeeded {
		e.t.Fatalf("%s, the attempt is %q", when, state)
	}
	e.paidOnce(when, orderID)
	wantEventPerFact(e.t, e.db, outbox.OrderPaid, 1)
}

// A failed authentication leaves the order payable; another card then pays
// it, once.
func TestFailedAuthenticationLeavesTheOrderPayable(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("auth-fail@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	_, page := e.payToAuthenticate(token, orderID, "k1")
	e.authenticate(page, "fail")
	if state := e.attemptState(token, orderID); state != models.Declined {
		t.Fatalf("after a failed authentication the attempt is %q, want declined", state)
	}
	if r := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("another card: %d %s", r.Status, r.Body)
	}
	e.paidOnce("after another card", orderID)
	wantEventPerFact(t, e.db, outbox.OrderPaymentDeclined, 1)
}

// An authentication nobody completes expires after the auth expiry: the
// reconciler settles it declined, and the order is payable again.
func TestAbandonedAuthenticationIsSettledByTheReconciler(t *testing.T) {
	const expiry = time.Minute
	e := newEnv(t, func(d *setup) { d.AuthExpiry = expiry })
	e.provider.AuthExpiry, e.provider.Now = expiry, e.clock.Now
	token := e.signUp("auth-abandon@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	e.payToAuthenticate(token, orderID, "k1")

	reconcile := func() int {
		n, err := e.server.Payments().Reconcile(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := reconcile(); n != 0 || e.count("payment_attempts", "state = ?", models.RequiresAction) != 1 {
		t.Fatalf("before the expiry the reconciler resolved %d", n)
	}
	isProblem(t, e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)), http.StatusConflict, "/problems/payment-in-progress")
	e.clock.Advance(expiry + time.Second)
	if n := reconcile(); n != 1 {
		t.Fatalf("after the expiry the reconciler resolved %d, want 1", n)
	}
	if e.count("payment_attempts", "state = ?", models.Declined) != 1 || e.count("orders", "id = ? AND held_by IS NULL", orderID) != 1 {
		t.Fatal("the abandoned attempt is not settled declined with the order free")
	}
	if r := e.do(e.payRequest(token, orderID, "k3", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay again: %d %s", r.Status, r.Body)
	}
	e.paidOnce("after the expiry", orderID)
	wantEventPerFact(t, e.db, outbox.OrderPaymentDeclined, 1)
}

// The pay form offers the cards of the provider the shop runs with, named
// as its test cards: with Stripe, not the simulation's card whose provider
// is down; with the simulation, that one too.
func TestPayFormOffersTheProvidersOwnTestCards(t *testing.T) {
	for _, c := range []struct {
		provider string
		cards    []string
		absent   string
	}{
		{"Stripe", payments.StripeCards, "Test card whose provider is down"},
		{"the simulated provider", payments.SimulatedCards, ""},
	} {
		t.Run(c.provider, func(t *testing.T) {
			e := newEnv(t, func(d *setup) {
				d.Payments = billing.New(billing.Config{DB: d.DB, Provider: d.Provider, Lease: d.Lease, AttemptTimeout: time.Minute,
					TestCards: c.cards, ProviderName: c.provider, Now: d.Now})
			})
			s := e.shopper()
			s.signUp("cards@example.com")
			page := string(s.get(s.placeOrder(s.checkout(e.products()[0], 1))).Body)
			if !strings.Contains(page, "with a test card of "+c.provider) {
				t.Fatalf("the pay form does not name %s", c.provider)
			}
			if n := strings.Count(page, `name="payment_method"`); n != len(c.cards) {
				t.Fatalf("the pay form offers %d cards, want %d", n, len(c.cards))
			}
			if c.absent != "" && strings.Contains(page, c.absent) {
				t.Fatalf("the pay form offers %q with %s", c.absent, c.provider)
			}
		})
	}
}

// A double-click on Complete sends both returns at once. Each answers only
// once the attempt is settled, whichever of the two settled it, so the
// order page each leads to shows the outcome, not the wait. (The provider's
// latency keeps the first run settling while the second arrives.)
func TestBothReturnsOfADoubleClickAnswerOnceSettled(t *testing.T) {
	e := newEnv(t, withLatency(200*time.Millisecond))
	token := e.signUp("auth-twice@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	_, page := e.payToAuthenticate(token, orderID, "k1")
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"outcome": {"complete"}, "return_url": {u.Query().Get("return_url")}}
	complete := request{method: "POST", path: u.Path, body: form.Encode(), contentType: "application/x-www-form-urlencoded"}
	first, second := e.async(complete), e.async(complete)
	for _, answer := range []<-chan answerOf{first, second} {
		a := <-answer
		if a.err != nil || a.Status != http.StatusSeeOther {
			t.Fatalf("a return: %d %v", a.Status, a.err)
		}
		if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.RequiresAction); n != 0 {
			t.Fatalf("a return answered while the attempt still waited (%d attempts waiting)", n)
		}
	}
	e.paidOnReturn(token, orderID, "after both returns")
}
