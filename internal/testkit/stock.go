package testkit

import (
	"fmt"

	"gorm.io/gorm"
)

// slotUnits is every row of units: each product's own (slot 0) and those of
// its other stock slots.
const slotUnits = `units AS (SELECT id AS product_id, 0 AS slot, stock, held FROM products
  UNION ALL SELECT product_id, slot, stock, held FROM stock_slots)`

// stockRules are queries that must find nothing, as moneyRules.
var stockRules = []struct{ name, query string }{
	{"a cancelled order whose units did not come back", `SELECT id FROM orders WHERE status = 'cancelled' AND stock_reserved`},
	{"an order not cancelled whose units came back", `SELECT id FROM orders WHERE status <> 'cancelled' AND restocked_at IS NOT NULL`},
	{"a paid order still holding units", `SELECT id FROM orders WHERE status IN ('paid', 'partially_refunded', 'refunded') AND stock_reserved`},
	{"a product whose held, in one of its slots, is not the units its live unpaid orders hold there", `WITH ` + slotUnits + `
  SELECT u.product_id FROM units u WHERE u.held <> (SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN orders o ON o.id = i.order_id
    WHERE i.product_id = u.product_id AND i.slot = u.slot AND o.stock_reserved)`},
	{"a shopper whose count of unpaid orders is wrong", `SELECT u.id FROM users u
  WHERE u.pending_orders <> (SELECT COUNT(*) FROM orders o WHERE o.user_id = u.id AND o.stock_reserved)`},
}

// AuditStock checks the stock identity, from the tables alone: for every
// product of had (its units at the start, plus those received, less those
// written off), on hand (stock + held) plus the units its paid orders sold
// is what it had, so no unit was lost or made; held is the units of the
// live unpaid orders, and each shopper's count of them is right; a
// cancelled order's units came back, a live one's did not.
func AuditStock(db *gorm.DB, had map[string]int) ([]string, error) {
	var rows []struct {
		ID                string
		Stock, Held, Sold int
	}
	err := db.Raw(`WITH ` + slotUnits + `, totals AS (SELECT product_id, SUM(stock) AS stock, SUM(held) AS held FROM units GROUP BY product_id)
  SELECT t.product_id AS id, t.stock, t.held, COALESCE(SUM(CASE WHEN o.status IN ('paid', 'partially_refunded', 'refunded') THEN i.quantity END), 0) AS sold
  FROM totals t LEFT JOIN order_items i ON i.product_id = t.product_id LEFT JOIN orders o ON o.id = i.order_id
  GROUP BY t.product_id, t.stock, t.held`).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	var violations []string
	for _, r := range rows {
		if units, ok := had[r.ID]; ok && r.Stock+r.Held+r.Sold != units {
			violations = append(violations, fmt.Sprintf("product %s: %d on hand (%d held) and %d sold, of %d", r.ID, r.Stock+r.Held, r.Held, r.Sold, units))
		}
	}
	for _, rule := range stockRules {
		var ids []string
		if err := db.Raw(rule.query).Scan(&ids).Error; err != nil {
			return nil, fmt.Errorf("%s: %w", rule.name, err)
		}
		for _, id := range ids {
			violations = append(violations, rule.name+": "+id)
		}
	}
	return violations, nil
}
