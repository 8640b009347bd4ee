package models

import (
	"gorm.io/gorm"

	"github.com/shop/shop/outbox"
)

// newWrites: orders reserve their units from stock, and facts record
// their events. Only the benchmark build (-tags benchnowrites, in
// benchnowrites.go) turns both off, to price them.
var newWrites = true

// event records, through tx, the event of one fact of the order: the
// order as the API shows it once the fact is written. factID is the id of
// the fact's own row (the order, payment or refund).
func event(tx *gorm.DB, typ, factID, orderID string) error {
	if !newWrites {
		return nil // nor the read (orderEvent would record nothing)
	}
	order, err := anyOrder(Shop{}.withLines(tx), orderID)
	if err != nil {
		return err
	}
	return orderEvent(tx, typ, factID, order)
}

// orderEvent records the event of a fact of order, as it stands: the order
// must be whole, with its lines, payments, attempts and refunds — as a
// placed order is in memory, when it has none of the last three, so that
// placing one reads nothing back (TestAPlacedOrdersEventIsTheOrderAsTheAPIShowsIt).
func orderEvent(tx *gorm.DB, typ, factID string, order Order) error {
	if !newWrites {
		return nil
	}
	return outbox.Record(tx, typ, factID, order.ID, ViewOrder(order))
}

// paymentEvent records the event of a payment the provider answered for
// good: paid or declined. One that requires action is not answered yet.
func paymentEvent(tx *gorm.DB, p Payment) error {
	switch p.Status {
	case PaymentSucceeded:
		return event(tx, outbox.OrderPaid, p.ID, p.OrderID)
	case PaymentDeclined:
		return event(tx, outbox.OrderPaymentDeclined, p.ID, p.OrderID)
	}
	return nil
}

// refundEvent records the event of a refund that reached state for good:
// succeeded or failed. A pending one is on its way; an excess one is the
// staff's to recover, not given back.
func refundEvent(tx *gorm.DB, r Refund, state State) error {
	switch state {
	case Succeeded:
		return event(tx, outbox.OrderRefunded, r.ID, r.OrderID)
	case Failed:
		return event(tx, outbox.OrderRefundFailed, r.ID, r.OrderID)
	}
	return nil
}
