package billing

import (
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
)

// paymentEvent records the event of a payment the provider answered for
// good: paid or declined. One that requires action is not answered yet.
func paymentEvent(tx *gorm.DB, p models.Payment) error {
	switch p.Status {
	case models.Succeeded:
		return orders.Paid(tx, p.ID, p.OrderID)
	case models.Declined:
		return orders.Event(tx, outbox.OrderPaymentDeclined, p.ID, p.OrderID)
	}
	return nil
}

// refundEvent records the event of a refund that reached state for good:
// succeeded or failed. A pending one is on its way; an excess one is the
// staff's to recover, not given back.
func refundEvent(tx *gorm.DB, r models.Refund, state models.State) error {
	switch state {
	case models.Succeeded:
		return orders.Event(tx, outbox.OrderRefunded, r.ID, r.OrderID)
	case models.Failed:
		return orders.Event(tx, outbox.OrderRefundFailed, r.ID, r.OrderID)
	}
	return nil
}
