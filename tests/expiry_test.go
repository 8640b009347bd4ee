package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/config"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// sweepTogether runs the expiry sweep of every server at once, released by
// one barrier, and returns how many orders each expired.
func sweepTogether(t *testing.T, servers ...*handlers.Server) []int {
	t.Helper()
	expired := make([]int, len(servers))
	errs := make([]error, len(servers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			<-start
			expired[i], errs[i] = s.ExpireOrders(context.Background())
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return expired
}

// sweepOnce runs one server's sweep and checks how many orders it expired.
func sweepOnce(t *testing.T, s *handlers.Server, want int, when string) {
	t.Helper()
	if n, err := s.ExpireOrders(context.Background()); err != nil || n != want {
		t.Fatalf("the sweep %s expired %d, %v; want %d", when, n, err, want)
	}
}

// orderStatus is the order's status and cancel reason in the API.
func (e *env) orderStatus(token, orderID string) (string, string) {
	e.t.Helper()
	r := e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token})
	if r.Status != http.StatusOK {
		e.t.Fatalf("get order: %d %s", r.Status, r.Body)
	}
	body := r.json(e.t)
	reason, _ := body["cancel_reason"].(string)
	return body["status"].(string), reason
}

// Five unpaid orders hold the last 10 units of a product. Before
// ORDER_EXPIRY nothing expires; past it, two servers on one database sweep
// at once: each order is expired by one of them, once, its units back,
// and a later sweep finds nothing. The API says cancel_reason "expired";
// the order page says why, in the shopper's words.
func TestAnUnpaidOrderExpiresOnceAcrossTwoSweepers(t *testing.T) {
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", 10)
	token := e.signUp("expiry@example.com")
	var placed []string
	for i := range 4 {
		placed = append(placed, e.createOrder(token, fmt.Sprintf("expiry-%d", i), orderBody(tote, 2)))
	}
	s := e.shopper()
	s.signUp("expiry-page@example.com")
	orderPath := s.placeOrder(s.checkout(tote, 2))
	if left := unitsLeft(t, e.db, tote); left != 0 {
		t.Fatalf("%d units left after 5 placed of 2, want 0", left)
	}
	other := newServer(t, e.deps)
	e.clock.Advance(config.Default().OrderExpiry - time.Minute)
	if n := sweepTogether(t, e.server, other); n[0]+n[1] != 0 {
		t.Fatalf("the sweeps expired %v before ORDER_EXPIRY, want none", n)
	}
	e.clock.Advance(2 * time.Minute)
	if n := sweepTogether(t, e.server, other); n[0]+n[1] != 5 {
		t.Fatalf("the two sweeps expired %v, want 5 in all", n)
	}
	if n := e.count("orders", "status = ? AND cancel_reason = ? AND restocked_at IS NOT NULL", models.OrderCancelled, models.CancelledExpired); n != 5 {
		t.Fatalf("%d placed expired and restocked, want 5", n)
	}
	if left := unitsLeft(t, e.db, tote); left != 10 {
		t.Fatalf("%d units in stock after the expiry, want 10: each order's back once", left)
	}
	sweepOnce(t, other, 0, "after the placed expired")
	wantStockIdentity(t, e.db, map[string]int{tote: 10})
	for _, id := range placed {
		if status, reason := e.orderStatus(token, id); status != models.OrderCancelled || reason != models.CancelledExpired {
			t.Fatalf("order %s: %s, cancel_reason %q; want cancelled, expired", id, status, reason)
		}
	}
	isPage(t, s.get(orderPath), http.StatusOK, "This order was cancelled because it was not paid within 30 minutes; its items went back on the shelf.")
	if r := s.get(orderPath); strings.Contains(string(r.Body), `action="`+orderPath+`/payments"`) {
		t.Fatal("the expired order's page still offers to pay it")
	}
	wantEventPerFact(t, e.db, outbox.OrderCancelled, 5)
}

// An order whose payment attempt is in doubt (the provider's answer lost,
// nothing charged) is not expired, however old: a charge may land. Nor is
// an order a payment operation holds, until the hold lapses. Once the
// reconciler settles the attempt failed, the next sweep expires the order.
// The stock identity holds throughout.
func TestExpiryWaitsForAnAttemptInDoubt(t *testing.T) {
	lost := &failing{err: errors.New("write: broken pipe"), n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	tote := stockOf(t, e.db, "TOTE-CNV", 5)
	token := e.signUp("expiry-doubt@example.com")
	doubtful := e.createOrder(token, "doubtful", orderBody(tote, 2))
	isProblem(t, e.do(e.payRequest(token, doubtful, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	held := e.createOrder(token, "held", orderBody(tote, 1))
	holdUntil := e.clock.Now().Add(config.Default().OrderExpiry + 10*time.Minute)
	if err := e.db.Model(&models.Order{}).Where("id = ?", held).Updates(map[string]any{"held_by": "pay/run", "held_until": holdUntil}).Error; err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(config.Default().OrderExpiry + time.Minute)
	sweepOnce(t, e.server, 0, "with one attempt in doubt and one order held")
	if n := e.count("orders", "status = ?", models.OrderPending); n != 2 {
		t.Fatalf("%d orders pending, want both: a charge may still land", n)
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 5})
	if left := unitsLeft(t, e.db, tote); left != 2 {
		t.Fatalf("%d units in stock, want 2: the orders keep theirs", left)
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want the attempt settled", n, err)
	}
	if n := e.count("payment_attempts", "order_id = ? AND state = ?", doubtful, models.Failed); n != 1 || e.charges() != 0 {
		t.Fatal("the attempt is not settled failed, with nothing charged")
	}
	sweepOnce(t, e.server, 1, "once the attempt settled")
	if status, reason := e.orderStatus(token, doubtful); status != models.OrderCancelled || reason != models.CancelledExpired {
		t.Fatalf("the settled order: %s, %q; want cancelled, expired", status, reason)
	}
	e.clock.Advance(10 * time.Minute)
	sweepOnce(t, e.server, 1, "once the hold lapsed")
	if left := unitsLeft(t, e.db, tote); left != 5 {
		t.Fatalf("%d units in stock, want all 5 back", left)
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 5})
}

// A paid order is never expired, however old: it keeps its units.
func TestAPaidOrderNeverExpires(t *testing.T) {
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", 3)
	token := e.signUp("expiry-paid@example.com")
	orderID := e.createOrder(token, "paid", orderBody(tote, 2))
	if r := e.do(e.payRequest(token, orderID, "pay", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	e.clock.Advance(24 * time.Hour)
	sweepOnce(t, e.server, 0, "a day after the payment")
	if status, reason := e.orderStatus(token, orderID); status != models.OrderPaid || reason != "" {
		t.Fatalf("the paid order: %s, %q; want paid, no cancel reason", status, reason)
	}
	if left := unitsLeft(t, e.db, tote); left != 1 || e.charges() != 1 {
		t.Fatalf("%d units in stock, %d charges; want 1 and 1", left, e.charges())
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 3})
}

// Ten shoppers cancel their expired orders while two servers sweep: each
// order is cancelled once, by its shopper or by a sweep, and its units
// come back once. Every cancel answers 200 cancelled, whoever won.
func TestCancelRacedAgainstTheExpirySweepReturnsUnitsOnce(t *testing.T) {
	const shoppers = 10
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", shoppers)
	token := e.signUp("expiry-race@example.com")
	cancels := make([]request, shoppers)
	for i := range cancels {
		orderID := e.createOrder(token, fmt.Sprintf("race-%d", i), orderBody(tote, 1))
		cancels[i] = e.cancelRequest(token, orderID, fmt.Sprintf("cancel-%d", i), `{}`)
	}
	other := newServer(t, e.deps)
	e.clock.Advance(config.Default().OrderExpiry + time.Minute)
	var answers []response
	var swept []int
	var wg sync.WaitGroup
	wg.Go(func() { answers = e.concurrently(cancels) })
	wg.Go(func() { swept = sweepTogether(t, e.server, other) })
	wg.Wait()
	for _, a := range answers {
		if a.Status != http.StatusOK || a.json(t)["status"] != models.OrderCancelled {
			t.Fatalf("cancel: %d %s; want 200 cancelled", a.Status, a.Body)
		}
	}
	byShopper := e.count("orders", "status = ? AND cancel_reason = ?", models.OrderCancelled, models.CancelledByShopper)
	if expired := e.count("orders", "status = ? AND cancel_reason = ?", models.OrderCancelled, models.CancelledExpired); int(expired) != swept[0]+swept[1] || byShopper+expired != shoppers {
		t.Fatalf("%d cancelled by shoppers, %d expired (the sweeps say %v); want %d in all", byShopper, expired, swept, shoppers)
	}
	if left := unitsLeft(t, e.db, tote); left != shoppers {
		t.Fatalf("%d units in stock, want %d: each order's unit back once", left, shoppers)
	}
	wantStockIdentity(t, e.db, map[string]int{tote: shoppers})
	wantEventPerFact(t, e.db, outbox.OrderCancelled, shoppers)
}

// An order whose payment waits for the shopper to authenticate (3-D
// Secure) is not expired, even once the authentication's own hold has
// lapsed, until the attempt is settled: until then the shopper may still
// complete it, and be charged. Settled declined, the next sweep expires it.
func TestExpiryWaitsForAnAuthentication(t *testing.T) {
	const authExpiry = time.Minute
	e := newEnv(t, func(d *setup) { d.AuthExpiry = authExpiry })
	e.provider.AuthExpiry, e.provider.Now = authExpiry, e.clock.Now
	tote := stockOf(t, e.db, "TOTE-CNV", 4)
	token := e.signUp("expiry-auth@example.com")
	orderID := e.createOrder(token, "waiting", orderBody(tote, 3))
	e.payToAuthenticate(token, orderID, "k1")
	e.clock.Advance(config.Default().OrderExpiry + time.Minute) // past the order's expiry and the authentication's
	if n := e.count("orders", "id = ? AND held_until > ?", orderID, e.clock.Now()); n != 0 {
		t.Fatal("the authentication's hold is still live: the test would not reach the lapsed case")
	}
	sweepOnce(t, e.server, 0, "with the attempt still awaiting authentication")
	// Read in the database: the order's GET would ask the provider first.
	if n := e.count("orders", "id = ? AND status = ?", orderID, models.OrderPending); n != 1 || unitsLeft(t, e.db, tote) != 1 {
		t.Fatalf("the waiting order: pending %d, %d units left; want pending, keeping its 3", n, unitsLeft(t, e.db, tote))
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want the abandoned authentication settled", n, err)
	}
	sweepOnce(t, e.server, 1, "once the authentication was settled")
	if left := unitsLeft(t, e.db, tote); left != 4 || e.charges() != 0 {
		t.Fatalf("%d units in stock and %d charges; want all 4 back and none", left, e.charges())
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 4})
}

// An order the last release placed took no units from stock (it sold
// without counting): cancelling it, or expiring it, gives none back, so
// no unit is made from nothing after the upgrade.
func TestOrdersOfTheLastReleaseGiveNoUnitsBack(t *testing.T) {
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", 4)
	token := e.signUp("last-release@example.com")
	cancelled := e.createOrder(token, "cancelled", orderBody(tote, 1))
	expired := e.createOrder(token, "expired", orderBody(tote, 2))
	// As the last release left them: placed without taking their units,
	// holding none, counted in no shopper's unpaid orders.
	if err := e.db.Model(&models.Order{}).Where("id IN ?", []string{cancelled, expired}).Update("stock_reserved", false).Error; err != nil {
		t.Fatal(err)
	}
	must(t, e.db.Model(&models.Product{}).Where("id = ?", tote).Update("held", 0).Error)
	must(t, e.db.Table("users").Where("email = ?", "last-release@example.com").Update("pending_orders", 0).Error)
	stockOf(t, e.db, "TOTE-CNV", 4)
	if r := e.do(e.cancelRequest(token, cancelled, "cancel", `{}`)); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	e.clock.Advance(config.Default().OrderExpiry + time.Minute)
	sweepOnce(t, e.server, 1, "past the last release's order's expiry")
	if n := e.count("orders", "status = ?", models.OrderCancelled); n != 2 {
		t.Fatalf("%d orders cancelled, want both", n)
	}
	if left := unitsLeft(t, e.db, tote); left != 4 {
		t.Fatalf("%d units in stock, want the 4 there were: those orders never took any", left)
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 4})
}
