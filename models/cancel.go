package models

import (
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/outbox"
)

// CancelOrder cancels one of the user's pending orders through tx, if no
// operation holds it and no payment attempt of it is in doubt: nothing was
// charged, and nothing can be any more. Its units come back to stock in
// the same transaction, once.
func (s Shop) CancelOrder(tx *gorm.DB, userID, orderID string, now time.Time) (Order, error) {
	order, err := ownOrder(tx, userID, orderID)
	switch {
	case err != nil:
		return Order{}, err
	case order.Status == OrderCancelled:
		return ownOrder(s.withLines(tx), userID, orderID)
	case order.Status != OrderPending:
		return Order{}, ErrOrderPaid
	}
	// The order's row first, as BeginPayment takes it: the two serialize.
	res := tx.Model(&Order{}).Where("id = ? AND status = ?", order.ID, OrderPending).
		Where("held_by IS NULL OR held_until <= ?", now).
		Updates(map[string]any{"status": OrderCancelled, "cancel_reason": CancelledByShopper, "held_by": nil, "held_until": nil})
	if res.Error != nil {
		return Order{}, res.Error
	}
	if res.RowsAffected != 1 {
		err := busy[PaymentAttempt](tx, charges, order.ID)
		if errors.Is(err, ErrOrderCancelled) {
			// Cancelled meanwhile, by another cancel: so is this one.
			return ownOrder(s.withLines(tx), userID, orderID)
		}
		return Order{}, err
	}
	var doubts int64
	if err := tx.Model(&PaymentAttempt{}).Where("order_id = ? AND state IN ?", order.ID, open).Count(&doubts).Error; err != nil {
		return Order{}, err
	}
	if doubts > 0 {
		return Order{}, ErrPaymentInDoubt
	}
	// Only the cancel that cancelled it gets here; returnStock guards anyway.
	if err := returnStock(tx, order.ID, now); err != nil {
		return Order{}, err
	}
	if err := event(tx, outbox.OrderCancelled, order.ID, order.ID); err != nil {
		return Order{}, err
	}
	return ownOrder(s.withLines(tx), userID, orderID)
}
