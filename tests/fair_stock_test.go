package tests

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

func withMaxPending(n int) option {
	return func(deps *setup) { deps.MaxPendingOrders = n }
}

// productCounts is a product's on hand, held and available, as stored.
func productCounts(t *testing.T, e *env, id string) (onHand, held, available int) {
	t.Helper()
	var p models.Product
	must(t, e.db.Take(&p, "id = ?", id).Error)
	return p.OnHand(), p.Held, p.Stock
}

func wantCounts(t *testing.T, e *env, id string, onHand, held, available int) {
	t.Helper()
	if o, h, a := productCounts(t, e, id); o != onHand || h != held || a != available {
		t.Fatalf("on hand %d, held %d, available %d; want %d, %d, %d", o, h, a, onHand, held, available)
	}
}

// The adversary's case: 5 unpaid orders hold all 5 totes; staff count 5 on
// hand; 2 of the orders are cancelled. On hand stays 5, 3 are still held,
// and 2 are for sale, which the API's stock says: no unit is promised
// twice. Paying one of the others takes its unit off hand.
func TestAStaffCountSetsOnHandNotWhatIsForSale(t *testing.T) {
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", 5)
	token := e.signUp("holder@example.com")
	var ids []string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		ids = append(ids, e.createOrder(token, "hold-"+k, orderBody(tote, 1)))
	}
	wantCounts(t, e, tote, 5, 5, 0)
	staff := e.staffBrowser("counter@example.com")
	page := staff.post("/staff/products/stock", staffForm(t, staff, "/staff/products", "/staff/products/stock", "sku", "TOTE-CNV", "change", "count", "stock", "5"))
	isPage(t, page, http.StatusOK, "5 units on hand. 5 held by unpaid orders, 0 for sale.")
	wantCounts(t, e, tote, 5, 5, 0)
	for i, id := range ids[:2] {
		if r := e.do(e.cancelRequest(token, id, "cancel-"+string(rune('a'+i)), `{}`)); r.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
	}
	wantCounts(t, e, tote, 5, 3, 2)
	for _, p := range e.do(request{method: "GET", path: "/api/v1/products"}).json(t)["products"].([]any) {
		if p := p.(map[string]any); p["id"] == tote && p["stock"] != float64(2) {
			t.Fatalf("the API's stock of the tote: %v, want the 2 for sale", p["stock"])
		}
	}
	if r := e.do(e.payRequest(token, ids[2], "pay", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	wantCounts(t, e, tote, 4, 2, 2)
	wantStockIdentity(t, e.db, map[string]int{tote: 5})
	if n := e.count("users", "email = ? AND pending_orders = 2", "holder@example.com"); n != 1 {
		t.Fatal("the shopper's count of unpaid orders is not 2")
	}
}

// The 4th unpaid order of a shopper is refused, 409 too-many-pending-orders:
// no order, nothing held, the key released; once one of the three is paid,
// the same request with the same key places it. Another shopper is not
// held back meanwhile.
func TestTheFourthUnpaidOrderWaitsUntilOneIsPaid(t *testing.T) {
	e := newEnv(t, withMaxPending(config.Default().MaxPendingOrders))
	p := e.products()[0]
	token := e.signUp("busy@example.com")
	var ids []string
	for _, k := range []string{"1", "2", "3"} {
		ids = append(ids, e.createOrder(token, "order-"+k, orderBody(p, 2)))
	}
	onHand, held, _ := productCounts(t, e, p)
	fourth := request{method: "POST", path: "/api/v1/orders", token: token, key: key("order-4"), body: orderBody(p, 2)}
	before := e.sideEffects()
	r := e.do(fourth)
	isProblem(t, r, http.StatusConflict, "/problems/too-many-pending-orders")
	if after := e.sideEffects(); after.orders != before.orders || after.storedKeys != before.storedKeys {
		t.Fatalf("the refused order wrote %+v, was %+v", after, before)
	}
	wantCounts(t, e, p, onHand, held, onHand-held)
	e.createOrder(e.signUp("other@example.com"), "other", orderBody(p, 1))
	if r := e.do(e.payRequest(token, ids[0], "pay-1", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	r = e.do(fourth)
	if r.Status != http.StatusCreated || r.replayed() {
		t.Fatalf("the same order once one was paid: %d %s", r.Status, r.Body)
	}
	if n := e.count("orders", "user_id = (SELECT id FROM users WHERE email = ?) AND status = ?", "busy@example.com", models.OrderPending); n != 3 {
		t.Fatalf("%d unpaid orders, want 3", n)
	}
	wantCounts(t, e, p, onHand-2, held+1, onHand-held-3)
}

// One line of more than orders.MaxQuantity units is refused, 422
// validation naming that line; nothing is ordered or held.
func TestALineOverTheLimitIsRefusedByName(t *testing.T) {
	e := newEnv(t)
	p := e.products()
	token := e.signUp("bulk@example.com")
	_, held, _ := productCounts(t, e, p[1])
	r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("bulk"), body: orderBody(p[0], 10, p[1], 11), offContract: true})
	isProblem(t, r, http.StatusUnprocessableEntity, "/problems/validation")
	if !strings.Contains(string(r.Body), `"field":"items[1].quantity"`) || strings.Contains(string(r.Body), "items[0]") {
		t.Fatalf("the refusal does not name the second line alone: %s", r.Body)
	}
	if _, h, _ := productCounts(t, e, p[1]); e.count("orders") != 0 || h != held {
		t.Fatalf("a refused order wrote %d orders, held %d (was %d)", e.count("orders"), h, held)
	}
	e.createOrder(token, "ten", orderBody(p[0], 10))
}

// A delivery received and units written off, each sent twice with one key
// (a retry), count once: on hand moves by each once, one audit entry each
// with its reason. Writing off more than is for sale is refused, 422, and
// changes nothing.
func TestARetriedStockAdjustmentCountsOnce(t *testing.T) {
	e := newEnv(t)
	tote := stockOf(t, e.db, "TOTE-CNV", 5)
	e.createOrder(e.signUp("holds@example.com"), "hold", orderBody(tote, 3))
	staff := e.staffBrowser("stock@example.com")
	for _, tc := range []struct {
		change, units, reason, says string
		onHand, available           int
	}{
		{"received", "12", "delivery 42", "17 units on hand.", 17, 14},
		{"written-off", "4", "water damage", "13 units on hand.", 13, 10},
	} {
		form := staffForm(t, staff, "/staff/products", "/staff/products/stock", "sku", "TOTE-CNV", "change", tc.change, "stock", tc.units, "reason", tc.reason)
		isPage(t, staff.post("/staff/products/stock", form), http.StatusOK, tc.says)
		if again := staff.post("/staff/products/stock", form); !again.replayed() {
			t.Fatalf("the retried %s was not replayed: %d", tc.change, again.Status)
		}
		wantCounts(t, e, tote, tc.onHand, 3, tc.available)
		if n := e.count("audit_entries", "action = ? AND actor_kind = ? AND reason LIKE ?", audit.ActionRestocked, audit.ActorStaff, tc.change+" "+tc.units+":%("+tc.reason+")"); n != 1 {
			t.Fatalf("%d audit entries of the %s, want 1", n, tc.change)
		}
	}
	wantStockIdentity(t, e.db, map[string]int{tote: 5 + 12 - 4})
	for _, bad := range [][]string{{"written-off", "11", "lost"}, {"received", "3", ""}, {"count", "2", ""}} {
		form := staffForm(t, staff, "/staff/products", "/staff/products/stock", "sku", "TOTE-CNV", "change", bad[0], "stock", bad[1], "reason", bad[2])
		isPage(t, staff.post("/staff/products/stock", form), http.StatusUnprocessableEntity, "Nothing was changed.")
	}
	wantCounts(t, e, tote, 13, 3, 10)
}

// Ten orders of one shopper at once, through the database's own
// concurrency (PostgreSQL's pool; SQLite's one writer): exactly
// MaxPendingOrders are placed, the rest refused, and the shopper's count
// is theirs.
func TestConcurrentOrdersOfOneShopperStopAtTheCap(t *testing.T) {
	e := newEnv(t, withMaxPending(config.Default().MaxPendingOrders))
	p := e.products()[0]
	token := e.signUp("racer@example.com")
	start := make(chan struct{})
	answers := make(chan int, 10)
	for i := range 10 {
		go func() {
			<-start
			answers <- e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("race-" + string(rune('a'+i))), body: orderBody(p, 1)}).Status
		}()
	}
	close(start)
	placed := 0
	for range 10 {
		switch status := <-answers; status {
		case http.StatusCreated:
			placed++
		case http.StatusConflict:
		default:
			t.Fatalf("an order answered %d", status)
		}
	}
	if want := config.Default().MaxPendingOrders; placed != want || e.count("orders") != int64(want) || e.count("users", "pending_orders = ?", want) != 1 {
		t.Fatalf("%d placed, %d orders; want %d of each and the shopper counting them", placed, e.count("orders"), want)
	}
	wantStockIdentity(t, e.db, nil)
}

// A database of the last release, its products' stock what was left to buy,
// is upgraded in place by migration 11: held is the units of its live unpaid
// orders, so on hand is stock + held; its paid and cancelled orders hold
// none; each shopper counts their unpaid orders; an order that never took
// units (before migration 3) is counted nowhere.
func TestMigration11CountsTheLastReleasesHeldUnits(t *testing.T) {
	db := testkit.NewDB(t)
	migrateTo(t, db, 10)
	now := time.Now().UTC()
	must(t, db.Exec(`INSERT INTO products (id, sku, name, price_cents, currency, stock) VALUES ('p1', 'SKU-1', 'One', 100, 'USD', 3), ('p2', 'SKU-2', 'Two', 100, 'USD', 9)`).Error)
	must(t, db.Exec(`INSERT INTO users (id, email, password_hash, created_at) VALUES ('u1', 'u1@example.com', 'x', ?), ('u2', 'u2@example.com', 'x', ?)`, now, now).Error)
	for i, o := range []struct {
		status   string
		reserved bool
		units    int
	}{{"pending", true, 2}, {"pending", true, 1}, {"paid", true, 4}, {"cancelled", true, 5}, {"pending", false, 7}} {
		id := fmt.Sprintf("o%d", i)
		must(t, db.Exec(`INSERT INTO orders (id, number, user_id, status, currency, total_cents, derived_key, stock_reserved, created_at) VALUES (?, ?, 'u1', ?, 'USD', 100, ?, ?, ?)`,
			id, 1001+i, o.status, id, o.reserved, now).Error)
		must(t, db.Exec(`INSERT INTO order_items (order_id, product_id, sku, name, unit_price_cents, quantity) VALUES (?, 'p1', 'SKU-1', 'One', 100, ?)`, id, o.units).Error)
	}
	must(t, database.Migrate(db))
	var products []models.Product
	must(t, db.Order("id").Find(&products).Error)
	if p := products[0]; p.Stock != 3 || p.Held != 3 || p.OnHand() != 6 || products[1].Held != 0 || products[1].Stock != 9 {
		t.Fatalf("after the upgrade: %+v; want p1 3 for sale, 3 held, 6 on hand, and p2 as it was", products)
	}
	if n := db.Model(&models.Order{}).Where("stock_reserved").Find(&[]models.Order{}).RowsAffected; n != 2 {
		t.Fatalf("%d orders hold units, want the 2 live unpaid ones", n)
	}
	var counts []int
	must(t, db.Table("users").Order("id").Pluck("pending_orders", &counts).Error)
	if !slices.Equal(counts, []int{2, 0}) {
		t.Fatalf("shoppers' unpaid orders %v, want [2 0]", counts)
	}
	wantStockIdentity(t, db, map[string]int{"p1": 3 + 3 + 4})
}
