package orders

import (
	"github.com/shop/shop/database"
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
	if database.IsPostgres(tx) {
		err := tx.Raw("SELECT nextval('order_numbers')").Scan(&n).Error
		return n, err
	}
	err := tx.Raw("SELECT COALESCE(MAX(number), ?) + 1 FROM orders", FirstOrderNumber-1).Scan(&n).Error
	return n, err
}
