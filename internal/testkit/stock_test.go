package testkit_test

import (
	"strings"
	"testing"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// The stock audit finds nothing on a seeded catalog, and names the
// product whose units went missing, and a cancelled order whose units did
// not come back.
func TestAuditStockFindsALostUnit(t *testing.T) {
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	if err := orders.Seed(db); err != nil {
		t.Fatal(err)
	}
	var products []models.Product
	if err := db.Find(&products).Error; err != nil {
		t.Fatal(err)
	}
	had := map[string]int{}
	for _, p := range products {
		had[p.ID] = p.Stock
	}
	if v, err := testkit.AuditStock(db, had); err != nil || len(v) != 0 {
		t.Fatalf("the seeded catalog: %v, %v; want no violation", v, err)
	}
	lost := products[0]
	if err := db.Model(&lost).Update("stock", lost.Stock-1).Error; err != nil {
		t.Fatal(err)
	}
	order := models.Order{ID: "00000000-0000-0000-0000-000000000001", UserID: "u", Status: models.OrderCancelled, Currency: "USD", DerivedKey: "k", StockReserved: true}
	if err := db.Create(&order).Error; err != nil {
		t.Fatal(err)
	}
	v, err := testkit.AuditStock(db, had)
	if err != nil || len(v) != 2 || !strings.Contains(v[0], lost.ID) || !strings.Contains(v[1], order.ID) {
		t.Fatalf("violations %q, %v; want the product a unit short, then the cancelled order not restocked", v, err)
	}
}
