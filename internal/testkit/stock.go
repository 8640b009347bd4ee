package testkit

import (
	"fmt"

	"gorm.io/gorm"
)

// stockRules are queries that must find nothing, as moneyRules.
var stockRules = []struct{ name, query string }{
	{"a cancelled order whose units did not come back", `SELECT id FROM orders WHERE status = 'cancelled' AND stock_reserved`},
	{"an order not cancelled whose units came back", `SELECT id FROM orders WHERE status <> 'cancelled' AND restocked_at IS NOT NULL`},
	{"a paid order still holding units", `SELECT id FROM orders WHERE status IN ('paid', 'partially_refunded', 'refunded') AND stock_reserved`},
	{"a product whose held is not the units of its live unpaid orders", `SELECT p.id FROM products p
  WHERE p.held <> (SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN orders o ON o.id = i.order_id WHERE i.product_id = p.id AND o.stock_reserved)`},
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
	err := db.Raw(`SELECT p.id, p.stock, p.held, COALESCE(SUM(CASE WHEN o.status IN ('paid', 'partially_refunded', 'refunded') THEN i.quantity END), 0) AS sold
  FROM products p LEFT JOIN order_items i ON i.product_id = p.id LEFT JOIN orders o ON o.id = i.order_id
  GROUP BY p.id, p.stock, p.held`).Scan(&rows).Error
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
