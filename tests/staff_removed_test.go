package tests

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/billing"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// A staff member removed on another instance is refused a staff cancel, a
// stock change and a decline at once, although the user it acts as (what a
// cached lookup still says) is staff: each act reads the role in the
// database, in the transaction that would write it, and writes nothing.
func TestRemovedStaffIsRefusedStockActsAtOnce(t *testing.T) {
	e := newEnv(t)
	productID := e.productPriced(1900)
	orderID := e.createOrder(e.signUp("shopper@example.com"), "pending", orderBody(productID, 1))
	_, staffID := e.staffToken("staff@example.com")
	var stale models.User
	if err := e.db.First(&stale, "id = ?", staffID).Error; err != nil || !stale.IsStaff() {
		t.Fatalf("the staff user as a cache holds it: %+v %v", stale, err)
	}
	if _, err := accounts.SetRole(t.Context(), e.db, "staff@example.com", models.Shopper); err != nil {
		t.Fatal(err)
	}
	var product models.Product
	if err := e.db.First(&product, "id = ?", productID).Error; err != nil {
		t.Fatal(err)
	}
	writes := func() [4]int64 {
		return [4]int64{e.count("orders", "status = ?", models.OrderCancelled), e.count("audit_entries"), e.count("events"), e.count("products", "id = ? AND stock = ? AND held = ?", productID, product.Stock, product.Held)}
	}
	before := writes()
	store, now := orders.Store{DB: e.db}, time.Now()
	acts := map[string]func(tx *gorm.DB) error{
		"cancel": func(tx *gorm.DB) error { _, err := store.CancelAnyOrder(tx, stale, orderID, now); return err },
		"stock": func(tx *gorm.DB) error {
			_, err := store.Restock(tx, stale, orders.StockChange{SKU: product.SKU, Kind: orders.Received, Units: 5, Reason: "a delivery"}, now)
			return err
		},
		"decline": func(tx *gorm.DB) error {
			_, err := billing.Ledger{DB: e.db}.DeclineRequest(tx, stale, orderID, uuid.NewString(), "no", now)
			return err
		},
	}
	for name, act := range acts {
		if err := e.db.Transaction(act); !errors.Is(err, models.ErrForbidden) {
			t.Errorf("%s by a removed staff member: %v, want ErrForbidden", name, err)
		}
	}
	if after := writes(); after != before {
		t.Fatalf("cancelled orders, audit entries, events, the product unchanged: %v after the refusals, %v before", after, before)
	}
}
