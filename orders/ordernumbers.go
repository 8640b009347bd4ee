package orders

import (
	"github.com/shop/shop/database"
	"gorm.io/gorm"
)

// FirstOrderNumber is a shop's first order number: "Order #1001".
const FirstOrderNumber = 1001

// nextOrderNumber takes the next order number in the order's transaction:
// from a sequence on PostgreSQL, so instances never wait for it (a rollback
// leaves a gap); on SQLite the highest plus one, free until the order
// commits since the transaction holds the write lock from BEGIN.
func nextOrderNumber(tx *gorm.DB) (int64, error) {
	var n int64
	if database.IsPostgres(tx) {
		err := tx.Raw("SELECT nextval('order_numbers')").Scan(&n).Error
		return n, err
	}
	err := tx.Raw("SELECT COALESCE(MAX(number), ?) + 1 FROM orders", FirstOrderNumber-1).Scan(&n).Error
	return n, err
}
