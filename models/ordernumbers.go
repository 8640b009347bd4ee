package models

import (
	"gorm.io/gorm"
)

// FirstOrderNumber is a shop's first order number: the one a shopper sees,
// "Order #1001".
const FirstOrderNumber = 1001

// nextOrderNumber takes the next order number, inside the transaction that
// writes the order. PostgreSQL draws it from a sequence, so instances never
// wait on one another for it (an order rolled back leaves a gap); SQLite's
// transactions hold its one write lock from BEGIN (_txlock=immediate), so
// the highest number plus one is free until the order commits. The unique
// index on orders.number backs both.
func nextOrderNumber(tx *gorm.DB) (int64, error) {
	var n int64
	if IsPostgres(tx) {
		err := tx.Raw("SELECT nextval('order_numbers')").Scan(&n).Error
		return n, err
	}
	err := tx.Raw("SELECT COALESCE(MAX(number), ?) + 1 FROM orders", FirstOrderNumber-1).Scan(&n).Error
	return n, err
}

// migrateOrderNumbers makes PostgreSQL's sequence and numbers the orders
// made before there were numbers, oldest first, in the migration's
// transaction.
func migrateOrderNumbers(tx *gorm.DB) error {
	if IsPostgres(tx) {
		if err := tx.Exec("CREATE SEQUENCE IF NOT EXISTS order_numbers START WITH 1001").Error; err != nil {
			return err
		}
	}
	var unnumbered []string
	if err := tx.Model(&Order{}).Where("number IS NULL").Order("created_at, id").Pluck("id", &unnumbered).Error; err != nil {
		return err
	}
	for _, id := range unnumbered {
		n, err := nextOrderNumber(tx)
		if err != nil {
			return err
		}
		if err := tx.Model(&Order{}).Where("id = ?", id).Update("number", n).Error; err != nil {
			return err
		}
	}
	return nil
}
