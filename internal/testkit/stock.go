package testkit

import (
	"fmt"

	"gorm.io/gorm"
)

// stockRules are queries that must find nothing, as moneyRules.
var stockRules = []struct{ name, query string }{
	{"a cancelled order whose units did not come back", `SELECT id FROM orders WHERE status = 'cancelled' AND stock_reserved AND restocked_at IS NULL`},
	{"an order not cancelled whose units came back", `SELECT id FROM orders WHERE status <> 'cancelled' AND restocked_at IS NOT NULL`},
}

// AuditStock checks the stock identity, from the tables alone: for every
// product of had, the units it had are the units it has plus those its
// live (not cancelled) orders hold (those that took their units: not the
// last release's), so no unit was lost or made; and a
// cancelled order's units came back, a live one's did not.
func AuditStock(db *gorm.DB, had map[string]int) ([]string, error) {
	var rows []struct {
		ID          string
		Stock, Held int
	}
	err := db.Raw(`SELECT p.id, p.stock, COALESCE(SUM(CASE WHEN o.status <> 'cancelled' AND o.stock_reserved THEN i.quantity END), 0) AS held
  FROM products p LEFT JOIN order_items i ON i.product_id = p.id LEFT JOIN orders o ON o.id = i.order_id
  GROUP BY p.id, p.stock`).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	var violations []string
	for _, r := range rows {
		if units, ok := had[r.ID]; ok && r.Stock+r.Held != units {
			violations = append(violations, fmt.Sprintf("product %s: %d in stock and %d held by live orders, of %d", r.ID, r.Stock, r.Held, units))
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
