package models

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Payment finds one payment of one of the user's orders: a payment of
// anyone else's order is as missing as one that does not exist.
func (s Shop) Payment(ctx context.Context, userID, orderID, paymentID string) (Payment, error) {
	db := s.DB.WithContext(ctx)
	order, err := ownOrder(db, userID, orderID)
	if err != nil {
		return Payment{}, err
	}
	if _, err := uuid.Parse(paymentID); err != nil {
		return Payment{}, ErrNotFound
	}
	var payment Payment
	err = db.Where("id = ? AND order_id = ?", paymentID, order.ID).Take(&payment).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Payment{}, ErrNotFound
	}
	return payment, err
}
