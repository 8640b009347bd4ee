package testkit

import (
	"fmt"
	"time"

	"gorm.io/gorm"
)

// MoneyAudit is what the database and the simulated provider's ledger
// say about orders and charges, and what in them breaks the contract.
type MoneyAudit struct {
	Orders, PaidOrders, Charges int64
	Violations                  []string
}

// paidStates are the order states that follow a succeeded charge.
const paidStates = "('paid', 'partially_refunded', 'refunded')"

// moneyRules are queries that must find nothing; each row found is a
// violation, described by the query's name and the row's id.
var moneyRules = []struct{ name, query string }{
	{"an order with more than one succeeded charge", `SELECT a.order_id FROM simulated_charges c
  JOIN payment_attempts a ON a.provider_key = c.idempotency_key
  WHERE c.status = 'succeeded' GROUP BY a.order_id HAVING count(*) > 1`},
	{"a paid order without a succeeded charge", `SELECT o.id FROM orders o WHERE o.status IN ` + paidStates + ` AND NOT EXISTS (
  SELECT 1 FROM simulated_charges c JOIN payment_attempts a ON a.provider_key = c.idempotency_key
  WHERE a.order_id = o.id AND c.status = 'succeeded')`},
	{"a succeeded charge of an order not paid", `SELECT c.id FROM simulated_charges c
  JOIN payment_attempts a ON a.provider_key = c.idempotency_key
  JOIN orders o ON o.id = a.order_id WHERE c.status = 'succeeded' AND o.status NOT IN ` + paidStates + ``},
	{"a succeeded charge without its payment row (unrecorded)", `SELECT c.id FROM simulated_charges c
  WHERE c.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = c.id AND p.status = 'succeeded')`},
	{"a charge under a key no payment attempt names", `SELECT c.id FROM simulated_charges c
  WHERE NOT EXISTS (SELECT 1 FROM payment_attempts a WHERE a.provider_key = c.idempotency_key)`},
}

// AuditMoney checks, from the tables alone: at most one succeeded charge
// per order, one for every paid order and none for any other, no charge
// the shop has not recorded.
func AuditMoney(db *gorm.DB) (MoneyAudit, error) {
	var a MoneyAudit
	counts := []struct {
		n     *int64
		query string
	}{
		{&a.Orders, `SELECT count(*) FROM orders`},
		{&a.PaidOrders, `SELECT count(*) FROM orders WHERE status = 'paid'`},
		{&a.Charges, `SELECT count(*) FROM simulated_charges WHERE status = 'succeeded'`},
	}
	for _, c := range counts {
		if err := db.Raw(c.query).Scan(c.n).Error; err != nil {
			return a, err
		}
	}
	for _, rule := range moneyRules {
		var ids []string
		if err := db.Raw(rule.query).Scan(&ids).Error; err != nil {
			return a, fmt.Errorf("%s: %w", rule.name, err)
		}
		for _, id := range ids {
			a.Violations = append(a.Violations, rule.name+": "+id)
		}
	}
	return a, nil
}

// StalledKeys lists the keys still held in progress by an owner whose
// lease ended more than grace ago: work nobody finished and nobody took over.
func StalledKeys(db *gorm.DB, grace time.Duration) ([]string, error) {
	var keys []string
	err := db.Raw(`SELECT "key" FROM idempotency_keys WHERE state = 'in_progress' AND owner_token <> '' AND locked_until < ?`,
		time.Now().Add(-grace)).Scan(&keys).Error
	return keys, err
}
