package orders

import (
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

// Event records the event of one fact of the order (factID: its row's id):
// the order as the API shows it once the fact is written.
func Event(tx *gorm.DB, typ, factID, orderID string) error {
	order, err := AnyOrder(Store{}.withLines(tx), orderID)
	if err != nil {
		return err
	}
	return orderEvent(tx, typ, factID, order)
}

// orderEvent records the event of a fact of order, which must be whole, as
// a placed order is in memory: placing one reads nothing back.
func orderEvent(tx *gorm.DB, typ, factID string, order models.Order) error {
	return outbox.Record(tx, typ, factID, order.ID, models.ViewOrder(order))
}
