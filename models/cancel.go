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
	return s.cancelOrder(tx, ownedBy(userID), CancelledByShopper, orderID, now)
}

// CancelAnyOrder is CancelOrder of any user's pending order, by the staff
// user by (ErrForbidden, and nothing written, for anyone else).
func (s Shop) CancelAnyOrder(tx *gorm.DB, by User, orderID string, now time.Time) (Order, error) {
	if !by.IsStaff() {
		return Order{}, ErrForbidden
	}
	return s.cancelOrder(tx, anyOrder, CancelledByStaff, orderID, now)
}

// cancelOrder cancels the order, found among those find lets the caller
// act on, for the reason.
func (s Shop) cancelOrder(tx *gorm.DB, find whose, reason, orderID string, now time.Time) (Order, error) {
	order, err := find(tx, orderID)
	switch {
	case err != nil:
		return Order{}, err
	case order.Status == OrderCancelled:
		return find(s.withLines(tx), orderID)
	case order.Status != OrderPending:
		return Order{}, ErrOrderPaid
	}
	// The order's row first, as BeginPayment takes it: the two serialize.
	res := tx.Model(&Order{}).Where("id = ? AND status = ?", order.ID, OrderPending).
		Where("held_by IS NULL OR held_until <= ?", now).
		Updates(map[string]any{"status": OrderCancelled, "cancel_reason": reason, "held_by": nil, "held_until": nil})
	if res.Error != nil {
		return Order{}, res.Error
	}
	if res.RowsAffected != 1 {
		err := busy[PaymentAttempt](tx, charges, order.ID)
		if errors.Is(err, ErrOrderCancelled) {
			// Cancelled meanwhile, by another cancel: so is this one.
			return find(s.withLines(tx), orderID)
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
	if err := Audit(tx, Entry{OrderID: order.ID, Action: ActionOrderCancelled, Reason: reason, At: now}); err != nil {
		return Order{}, err
	}
	// Only the cancel that cancelled it gets here; returnStock guards anyway.
	if err := returnStock(tx, order.ID, now); err != nil {
		return Order{}, err
	}
	if err := event(tx, outbox.OrderCancelled, order.ID, order.ID); err != nil {
		return Order{}, err
	}
	return find(s.withLines(tx), orderID)
}
