package tests

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// slotUnits is the units of each of the product's rows, by slot: its own
// (slot 0), then those of stock_slots.
type slotUnits struct{ Slot, Stock, Held int }

func slotsOf(t *testing.T, e *env, productID string) (rows []slotUnits, stock, held int) {
	t.Helper()
	must(t, e.db.Raw(`SELECT 0 AS slot, stock, held FROM products WHERE id = ?
  UNION ALL SELECT slot, stock, held FROM stock_slots WHERE product_id = ? ORDER BY slot`, productID, productID).Scan(&rows).Error)
	for _, r := range rows {
		stock, held = stock+r.Stock, held+r.Held
	}
	return rows, stock, held
}

// wantSlots checks the product's units for sale and held over all its rows,
// and that the catalog says the same.
func wantSlots(t *testing.T, e *env, productID string, stock, held int) []slotUnits {
	t.Helper()
	rows, s, h := slotsOf(t, e, productID)
	if s != stock || h != held {
		t.Fatalf("over its slots %+v: %d for sale and %d held, want %d and %d", rows, s, h, stock, held)
	}
	products, err := orders.Store{DB: e.db}.Products(t.Context())
	must(t, err)
	i := slices.IndexFunc(products, func(p models.Product) bool { return p.ID == productID })
	if i < 0 || products[i].Stock != stock || products[i].Held != held {
		t.Fatalf("the catalog says %+v, want %d for sale and %d held", products, stock, held)
	}
	return rows
}

// A product split over 4 slots for a flash sale: 20 shoppers race for its
// 7 units, one each. Exactly 7 are sold, whichever slot each shopper drew,
// so no shopper is refused while any slot has a unit; the units left over
// gather where an order asks more than its slot has; a count and a
// cancellation keep the sums; gathered back into one row, nothing is lost.
func TestASplitProductSellsEveryUnitOnce(t *testing.T) {
	e := newEnv(t)
	store := orders.Store{DB: e.db}
	tote := stockOf(t, e.db, "TOTE-CNV", 7)
	p, err := store.SplitStock(t.Context(), "TOTE-CNV", 4)
	if err != nil || p.Stock != 7 || p.StockSlots != 4 {
		t.Fatalf("split: %+v (%v), want 7 for sale over 4 slots", p, err)
	}
	if rows := wantSlots(t, e, tote, 7, 0); fmt.Sprint(rows) != "[{0 2 0} {1 2 0} {2 2 0} {3 1 0}]" {
		t.Fatalf("split over %+v, want 2, 2, 2 and 1", rows)
	}
	const shoppers = 20
	tokens := make([]string, shoppers)
	for i := range tokens {
		tokens[i] = e.signUp(fmt.Sprintf("flash-%d@example.com", i))
	}
	answers := make([]response, shoppers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range shoppers {
		wg.Go(func() {
			<-start
			answers[i] = e.do(request{method: "POST", path: "/api/v1/orders", token: tokens[i], key: key(fmt.Sprintf("flash-%d", i)), body: orderBody(tote, 1)})
		})
	}
	close(start)
	wg.Wait()
	placed := 0
	for _, a := range answers {
		switch a.Status {
		case http.StatusCreated:
			placed++
		case http.StatusConflict:
			isProblem(t, a, http.StatusConflict, "/problems/out-of-stock")
		default:
			t.Fatalf("answer %d %s, want 201 or 409 out-of-stock", a.Status, a.Body)
		}
	}
	if placed != 7 || e.count("orders") != 7 {
		t.Fatalf("%d placed, %d orders; want all 7 units sold, one an order", placed, e.count("orders"))
	}
	wantSlots(t, e, tote, 0, 7)
	wantStockIdentity(t, e.db, map[string]int{tote: 7})

	// A count of 13 on hand: 6 more for sale, spread again; an order of 5
	// asks more than any slot has, and is placed from them all.
	_, err = store.SetStock(t.Context(), "TOTE-CNV", 13)
	must(t, err)
	wantSlots(t, e, tote, 6, 7)
	buyer := e.signUp("flash-five@example.com")
	five := e.createOrder(buyer, "flash-five", orderBody(tote, 5))
	wantSlots(t, e, tote, 1, 12)
	if r := e.do(request{method: "POST", path: "/api/v1/orders", token: buyer, key: key("flash-two"), body: orderBody(tote, 2)}); r.Status != http.StatusConflict {
		t.Fatalf("an order of 2 with 1 left: %d %s, want 409", r.Status, r.Body)
	}
	// Gathered into one row: the held units stay in their slots until their
	// orders end; a cancelled order's come back for sale.
	_, err = store.SplitStock(t.Context(), "TOTE-CNV", 1)
	must(t, err)
	if r := e.do(e.cancelRequest(buyer, five, "cancel-five", `{}`)); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	wantSlots(t, e, tote, 6, 7)
	e.createOrder(buyer, "flash-six", orderBody(tote, 6))
	rows := wantSlots(t, e, tote, 0, 13)
	wantStockIdentity(t, e.db, map[string]int{tote: 13})
	if rows[0].Stock != 0 {
		t.Fatalf("slots %+v after the last 6 were sold", rows)
	}
}

// Orders of two split products, few units each, race: every slot runs
// short again and again, so orders rebalance while others take, cancel and
// pay. None fails (on PostgreSQL a deadlock would be a 500), the lines drew
// many slots, and every unit is accounted for, slot by slot.
func TestSplitProductsUnderRaceNeitherDeadlockNorLoseUnits(t *testing.T) {
	e := newEnv(t)
	store := orders.Store{DB: e.db}
	had := map[string]int{stockOf(t, e.db, "TOTE-CNV", 30): 30, stockOf(t, e.db, "MUG-WHT", 40): 40}
	var ids []string
	for id := range had {
		ids = append(ids, id)
	}
	for _, sku := range []string{"TOTE-CNV", "MUG-WHT"} {
		_, err := store.SplitStock(t.Context(), sku, 8)
		must(t, err)
	}
	const shoppers = 24
	var wg sync.WaitGroup
	start := make(chan struct{})
	failed := make(chan string, shoppers*4)
	for i := range shoppers {
		token := e.signUp(fmt.Sprintf("race-slots-%d@example.com", i))
		wg.Go(func() {
			<-start
			for j := range 3 {
				r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key(fmt.Sprintf("race-slots-%d-%d", i, j)),
					body: orderBody(ids[0], 1+(i+j)%3, ids[1], 1+i%2)})
				switch {
				case r.Status == http.StatusCreated && j == 1:
					id := r.json(t)["id"].(string)
					if c := e.do(e.cancelRequest(token, id, fmt.Sprintf("race-slots-cancel-%d", i), `{}`)); c.Status != http.StatusOK {
						failed <- fmt.Sprintf("cancel: %d %s", c.Status, c.Body)
					}
				case r.Status == http.StatusCreated && j == 0:
					id := r.json(t)["id"].(string)
					if p := e.do(e.payRequest(token, id, fmt.Sprintf("race-slots-pay-%d", i), payments.MethodVisa)); p.Status != http.StatusCreated {
						failed <- fmt.Sprintf("pay: %d %s", p.Status, p.Body)
					}
				case r.Status == http.StatusConflict:
					if typ, _ := r.json(t)["type"].(string); typ != "/problems/out-of-stock" {
						failed <- fmt.Sprintf("order: 409 %s, want out-of-stock", r.Body)
					}
				case r.Status != http.StatusCreated:
					failed <- fmt.Sprintf("order: %d %s", r.Status, r.Body)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(failed)
	for f := range failed {
		t.Error(f)
	}
	wantStockIdentity(t, e.db, had)
	if e.count("orders") < 10 || e.count("orders", "status = ?", models.OrderPaid) == 0 {
		t.Fatalf("%d orders placed, %d paid: too few to have raced", e.count("orders"), e.count("orders", "status = ?", models.OrderPaid))
	}
	var slots int64
	must(t, e.db.Table("order_items").Distinct("slot").Count(&slots).Error)
	if slots < 4 {
		t.Fatalf("the lines drew %d distinct slots of 8, want many", slots)
	}
}
