package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// stockOf sets the product's stock, as staff do, and returns its id.
func stockOf(t *testing.T, db *gorm.DB, sku string, units int) string {
	t.Helper()
	p, err := orders.Store{DB: db}.SetStock(t.Context(), sku, units)
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// unitsLeft is the product's stock now.
func unitsLeft(t *testing.T, db *gorm.DB, productID string) int {
	t.Helper()
	var stock int
	if err := db.Model(&models.Product{}).Where("id = ?", productID).Select("stock").Scan(&stock).Error; err != nil {
		t.Fatal(err)
	}
	return stock
}

// wantStockIdentity checks, for every product, that the units it had are
// the units it has plus those its live orders hold (not cancelled ones):
// nothing was lost or made. And a cancelled order's units came back.
func wantStockIdentity(t *testing.T, db *gorm.DB, had map[string]int) {
	t.Helper()
	violations, err := testkit.AuditStock(db, had)
	if err != nil {
		t.Fatal(err)
	}
	if len(violations) > 0 {
		t.Fatalf("the stock identity is broken: %q", violations)
	}
}

// lastUnitsRace has 50 shoppers, each with a key of their own, buy one of
// the last 3 units of a product at once, through the servers at urls in
// turn: exactly 3 orders, stock 0, and 47 answers out-of-stock that wrote
// nothing, no key kept.
func lastUnitsRace(t *testing.T, e *env, urls []string) {
	const shoppers, units = 50, 3
	tote := stockOf(t, e.db, "TOTE-CNV", units)
	token := e.signUp("last-units@example.com")
	before := e.sideEffects()
	requests := make([]request, shoppers)
	for i := range requests {
		requests[i] = request{method: "POST", path: "/api/v1/orders", token: token, key: key(fmt.Sprintf("last-%d", i)), body: orderBody(tote, 1)}
	}
	answers := make([]response, shoppers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range requests {
		on := &env{t: t, url: urls[i%len(urls)]}
		wg.Go(func() {
			<-start
			var err error
			if answers[i], err = on.send(r); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	placed := 0
	for _, a := range answers {
		switch {
		case a.Status == http.StatusCreated:
			placed++
		case a.Status == http.StatusConflict:
			isProblem(t, a, http.StatusConflict, "/problems/out-of-stock")
			if detail, _ := a.json(t)["detail"].(string); !strings.Contains(detail, "Canvas tote bag: none left") {
				t.Fatalf("out-of-stock detail %q does not say the tote bag has none left", detail)
			}
		default:
			t.Fatalf("answer %d %s, want 201 or 409 out-of-stock", a.Status, a.Body)
		}
	}
	after := e.sideEffects()
	if placed != units || after.orders-before.orders != units || after.keyRows-before.keyRows != units || after.storedKeys-before.storedKeys != units {
		t.Fatalf("%d placed of %d shoppers: %+v, from %+v; want %d orders and %d keys, the refusals keeping none", placed, shoppers, after, before, units, units)
	}
	if left := unitsLeft(t, e.db, tote); left != 0 {
		t.Fatalf("%d units left, want 0", left)
	}
	wantStockIdentity(t, e.db, map[string]int{tote: units})
}

// Fifty shoppers race for the last 3 units, through one server.
func TestLastUnitsAreSoldOnce(t *testing.T) {
	e := newEnv(t)
	lastUnitsRace(t, e, []string{e.url})
}

// Fifty shoppers race for the last 3 units through two instances, real
// processes on one database (PostgreSQL in CI's second run).
func TestLastUnitsAreSoldOnceAcrossTwoInstances(t *testing.T) {
	databaseURL := testkit.URL(t)
	a := startShop(t, "instance A", "DATABASE_URL="+databaseURL)
	b := startShop(t, "instance B", "DATABASE_URL="+databaseURL)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: a.url}
	lastUnitsRace(t, e, []string{a.url, b.url})
}

// An order stock cannot cover is refused whole: the line that could be
// covered reserved nothing either. The key was released, so the same
// request succeeds once the product is restocked, and its replay reserves
// nothing again.
func TestOutOfStockReleasesTheKeyAndReservesNothing(t *testing.T) {
	e := newEnv(t)
	tote, mug := stockOf(t, e.db, "TOTE-CNV", 2), stockOf(t, e.db, "MUG-WHT", 10)
	token := e.signUp("short@example.com")
	order := request{method: "POST", path: "/api/v1/orders", token: token, key: key("short"), body: orderBody(mug, 4, tote, 3)}
	before := e.sideEffects()
	r := e.do(order)
	isProblem(t, r, http.StatusConflict, "/problems/out-of-stock")
	body := r.json(t)
	if detail := body["detail"]; detail != "Canvas tote bag: 2 left, 3 asked. Nothing was ordered." {
		t.Fatalf("detail %q", detail)
	}
	if fields := fmt.Sprint(body["errors"]); !strings.Contains(fields, "items[1].quantity") {
		t.Fatalf("errors %s do not point at the tote bag's line", fields)
	}
	if after := e.sideEffects(); after != before || unitsLeft(t, e.db, tote) != 2 || unitsLeft(t, e.db, mug) != 10 {
		t.Fatalf("a refused order wrote: %+v from %+v; stock %d and %d", after, before, unitsLeft(t, e.db, tote), unitsLeft(t, e.db, mug))
	}
	stockOf(t, e.db, "TOTE-CNV", 3)
	if r := e.do(order); r.Status != http.StatusCreated || r.replayed() {
		t.Fatalf("after the restock: %d %s, want the order placed", r.Status, r.Body)
	}
	if r := e.do(order); r.Status != http.StatusCreated || !r.replayed() {
		t.Fatalf("the replay: %d %s", r.Status, r.Body)
	}
	if e.count("orders") != 1 || unitsLeft(t, e.db, tote) != 0 || unitsLeft(t, e.db, mug) != 6 {
		t.Fatalf("%d orders, stock %d and %d; want one order, 0 and 6", e.count("orders"), unitsLeft(t, e.db, tote), unitsLeft(t, e.db, mug))
	}
}

// A cancelled order's units come back once: not again for a second cancel
// with another key, nor for the first cancel's replay. A refund does not
// restock: the goods may have shipped.
func TestCancelReturnsUnitsOnce(t *testing.T) {
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", 5)
	token := e.signUp("cancel-stock@example.com")
	orderID := e.createOrder(token, "order", orderBody(tote, 2))
	if left := unitsLeft(t, e.db, tote); left != 3 {
		t.Fatalf("%d left after an order of 2, want 3", left)
	}
	first := e.cancelRequest(token, orderID, "cancel", `{}`)
	for i, r := range []request{first, first, e.cancelRequest(token, orderID, "cancel-again", `{}`)} {
		if got := e.do(r); got.Status != http.StatusOK {
			t.Fatalf("cancel %d: %d %s", i, got.Status, got.Body)
		}
		if left := unitsLeft(t, e.db, tote); left != 5 {
			t.Fatalf("%d left after cancel %d, want 5", left, i)
		}
	}
	var order models.Order
	if err := e.db.Take(&order, "id = ?", orderID).Error; err != nil || order.CancelReason != models.CancelledByShopper || order.RestockedAt == nil {
		t.Fatalf("cancelled order %+v (%v), want cancelled by its shopper and restocked", order, err)
	}
	paid := e.createOrder(token, "paid", orderBody(tote, 1))
	if r := e.do(e.payRequest(token, paid, "pay", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	staff := e.signUp("stock-staff@example.com")
	e.makeStaff("stock-staff@example.com")
	if r := e.do(e.refundRequest(staff, paid, "refund", `{}`)); r.Status != http.StatusCreated {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	if left := unitsLeft(t, e.db, tote); left != 4 {
		t.Fatalf("%d left after a refund, want 4: a refund does not restock", left)
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 5})
}

// Cancel and pay race on the same order, many times: a paid order keeps
// its units, a cancelled one gives them back, once.
func TestCancelRacedAgainstPayReturnsUnitsOnce(t *testing.T) {
	e := newEnv(t, withLatency(5*time.Millisecond))
	tote := stockOf(t, e.db, "TOTE-CNV", 30)
	token := e.signUp("race-stock@example.com")
	for i := range 10 {
		orderID := e.createOrder(token, fmt.Sprintf("order-%d", i), orderBody(tote, 1+i%3))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, r := range []request{
			e.payRequest(token, orderID, "p-"+orderID, payments.MethodVisa),
			e.cancelRequest(token, orderID, "c-"+orderID, `{}`),
			e.cancelRequest(token, orderID, "c2-"+orderID, `{}`),
		} {
			wg.Go(func() {
				<-start
				if _, err := e.send(r); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		wantStockIdentity(t, e.db, map[string]int{tote: 30})
	}
	if e.count("orders", "status = ?", models.OrderPaid)+e.count("orders", "status = ?", models.OrderCancelled) != 10 {
		t.Fatalf("orders neither paid nor cancelled: %d paid, %d cancelled", e.count("orders", "status = ?", models.OrderPaid), e.count("orders", "status = ?", models.OrderCancelled))
	}
}
