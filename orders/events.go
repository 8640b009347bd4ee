package orders

import (
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

// Event records, through tx, the event of one fact of the order: the
// order as the API shows it once the fact is written. factID is the id of
// the fact's own row (the order, payment or refund).
func Event(tx *gorm.DB, typ, factID, orderID string) error {
	order, err := AnyOrder(Store{}.withLines(tx), orderID)
	if err != nil {
		return err
	}
	return orderEvent(tx, typ, factID, order)
}

// orderEvent records the event of a fact of order, as it stands: the order
// must be whole, with its lines, payments, attempts and refunds — as a
// placed order is in memory, when it has none of the last three, so that
// placing one reads nothing back (TestAPlacedOrdersEventIsTheOrderAsTheAPIShowsIt).
func orderEvent(tx *gorm.DB, typ, factID string, order models.Order) error {
	return outbox.Record(tx, typ, factID, order.ID, models.ViewOrder(order))
}
