package tests

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// pressTogether has each browser post its own form to path at once,
// behind one barrier: two staff members pressing the same button.
func pressTogether(t *testing.T, path string, browsers []*shopper, forms []url.Values) []response {
	t.Helper()
	out := make([]response, len(browsers))
	errs := make([]error, len(browsers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, b := range browsers {
		wg.Go(func() {
			<-start
			out[i], errs[i] = b.send(http.MethodPost, path, forms[i], nil)
		})
	}
	close(start)
	wg.Wait()
	must(t, errors.Join(errs...))
	return out
}

// A refund and a payment attempt left in doubt (the provider made them,
// its replies were lost) are listed with their age; two staff members press
// "Ask the provider now" on each at once, each with their own form's key:
// one press asks, the other is told there is nothing to ask (409), and each
// request is settled as the provider's ledger says — the charge taken once,
// the order paid; the refund made once, the order given it back. Nothing is
// left in doubt.
func TestAskTheProviderNowSettlesWhatIsInDoubt(t *testing.T) {
	lostCharge := &failing{err: errors.New("read: connection reset by peer"), afterCharge: true}
	lostRefund := &lostRefund{}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider {
		lostCharge.Provider = p
		lostRefund.Provider = lostCharge
		return lostRefund
	}))
	staffToken, _ := e.staffToken("alice@example.com")
	_, refunded := e.shopperOrder("ann@example.com")
	lostRefund.n = 1
	isProblem(t, e.do(e.refundRequest(staffToken, refunded, "lost", `{"amount_cents":700}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	bob := e.signUp("bob@example.com")
	charged := e.createOrder(bob, "order-bob", orderBody(e.productPriced(1900), 1))
	lostCharge.mu.Lock()
	lostCharge.n = 1
	lostCharge.mu.Unlock()
	isProblem(t, e.do(e.payRequest(bob, charged, "pay-bob", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	if e.count("refunds", "state = ?", models.InDoubt) != 1 || e.count("payment_attempts", "state = ?", models.InDoubt) != 1 {
		t.Fatal("want one refund and one payment attempt in doubt")
	}
	chargesBefore, refundsBefore := e.charges(), e.count("simulated_refunds")

	alice := e.shopper()
	must(t, alice.logIn("alice@example.com"))
	carol := e.staffBrowser("carol@example.com")
	page := alice.get("/staff/in-doubt")
	isPage(t, page, http.StatusOK, "under a minute", "Ask the provider now")
	var refund models.Refund
	must(t, e.db.Take(&refund, "state = ?", models.InDoubt).Error)
	var attempt models.PaymentAttempt
	must(t, e.db.Take(&attempt, "state = ?", models.InDoubt).Error)
	for _, row := range []string{"refund/" + refund.ID, "payment/" + attempt.ID} {
		path := "/staff/in-doubt/" + row
		forms := []url.Values{staffForm(t, alice, "/staff/in-doubt", path), staffForm(t, carol, "/staff/in-doubt", path)}
		if forms[0].Get("idempotency_key") == forms[1].Get("idempotency_key") {
			t.Fatal("two renders share a key")
		}
		statuses := map[int]int{}
		for _, r := range pressTogether(t, path, []*shopper{alice, carol}, forms) {
			statuses[r.Status]++
		}
		if statuses[http.StatusSeeOther] != 1 || statuses[http.StatusConflict] != 1 {
			t.Fatalf("%s: the two presses answered %v, want one 303 and one 409", row, statuses)
		}
	}
	if got, want := fmt.Sprint(e.charges(), e.count("simulated_refunds")), fmt.Sprint(chargesBefore, refundsBefore); got != want {
		t.Fatalf("the provider's ledger (charges, refunds): %s after the presses, %s before", got, want)
	}
	must(t, e.db.Take(&refund, "id = ?", refund.ID).Error)
	must(t, e.db.Take(&attempt, "id = ?", attempt.ID).Error)
	if refund.State != models.Succeeded || attempt.State != models.Succeeded {
		t.Fatalf("the refund is %s, the attempt %s: want both succeeded, as the provider says", refund.State, attempt.State)
	}
	if o := e.orderJSON(bob, charged); o["status"] != models.OrderPaid || len(o["payments"].([]any)) != 1 {
		t.Fatalf("the charged order: %v", o)
	}
	var order models.Order
	must(t, e.db.Take(&order, "id = ?", refunded).Error)
	if order.Status != models.OrderPartiallyRefunded || order.RefundedCents != 700 {
		t.Fatalf("the refunded order: %s, %d given back", order.Status, order.RefundedCents)
	}
	isPage(t, alice.get("/staff/in-doubt"), http.StatusOK, "Nothing is in doubt.")
	if !strings.Contains(string(alice.get("/staff/orders/"+refunded).Body), "$7.00 by alice@example.com: succeeded.") {
		t.Fatal("the order's history does not tell the refund and who gave it")
	}
	if n := e.count("audit_entries", "action IN ? AND actor_kind = ?", []audit.Action{audit.ActionRefundSucceeded, audit.ActionChargeSucceeded}, audit.ActorStaff); n != 2 {
		t.Fatalf("%d audit entries of the settled refund and charge by the staff member who asked, want 2", n)
	}
	if r := alice.post("/staff/in-doubt/refund/"+refund.ID, url.Values{"idempotency_key": {"again"}}); r.Status != http.StatusConflict {
		t.Fatalf("asking about a settled refund: %d %s", r.Status, r.Body)
	}
	if r := alice.post("/staff/in-doubt/refund/not-a-refund", url.Values{"idempotency_key": {"nothing"}}); r.Status != http.StatusNotFound {
		t.Fatalf("asking about no refund: %d %s", r.Status, r.Body)
	}
}

// logIn signs the browser in with the password every test user has.
func (s *shopper) logIn(email string) error {
	r, err := s.send(http.MethodPost, "/login", url.Values{"email": {email}, "password": {webPassword}, "next": {"/staff"}}, nil)
	if err == nil && r.Status != http.StatusSeeOther {
		err = fmt.Errorf("log in: %d %s", r.Status, r.Body)
	}
	return err
}

// "Ask the provider now", when the provider cannot answer (the repeat's
// reply is lost too), tells the staff member the refund is still in doubt;
// it stays in doubt, refunded once.
func TestAskTheProviderNowTellsWhatStaysInDoubt(t *testing.T) {
	lost := &lostRefund{n: 2}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("lost@example.com", payments.MethodVisa)
	isProblem(t, e.do(e.refundRequest(token, orderID, "lost", `{"amount_cents":700}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	var refund models.Refund
	must(t, e.db.Take(&refund, "state = ?", models.InDoubt).Error)
	staff := e.staffBrowser("staff@example.com")
	path := "/staff/in-doubt/refund/" + refund.ID
	r := staff.post(path, staffForm(t, staff, "/staff/in-doubt", path))
	if r.Status != http.StatusSeeOther {
		t.Fatalf("asking: %d %s", r.Status, r.Body)
	}
	isPage(t, staff.get(r.Header.Get("Location")), http.StatusOK, "Still in doubt.", "Ask the provider now")
	isPage(t, staff.get("/staff/in-doubt"), http.StatusOK, "Ask the provider now")
	if strings.Contains(string(staff.get("/staff/in-doubt").Body), "Still in doubt.") {
		t.Fatal("the in-doubt page says still in doubt though nobody asked")
	}
	if n := e.count("refunds", "state = ?", models.InDoubt); n != 1 {
		t.Fatalf("%d refunds in doubt, want the 1 the provider could not answer for", n)
	}
	if n := e.count("simulated_refunds"); n != 1 {
		t.Fatalf("the provider made %d refunds, want 1", n)
	}
}
