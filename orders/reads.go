package orders

// The reads of the API's listings and resources: pages of orders, one payment.

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"gorm.io/gorm"
)

// OrdersPage lists up to limit of the user's orders, newest first, with
// their items and payments, from after p (from the newest when p is nil);
// more says whether any follow.
func (s Store) OrdersPage(ctx context.Context, userID string, p *database.Position, limit int) (orders []models.Order, more bool, err error) {
	return database.Page[models.Order](s.withLines(s.DB.WithContext(ctx)).Where("user_id = ?", userID), p, limit)
}

// Payment finds one payment of one of the user's orders: a payment of
// anyone else's order is as missing as one that does not exist.
func (s Store) Payment(ctx context.Context, userID, orderID, paymentID string) (models.Payment, error) {
	db := s.DB.WithContext(ctx)
	order, err := OwnOrder(db, userID, orderID)
	if err != nil {
		return models.Payment{}, err
	}
	if _, err := uuid.Parse(paymentID); err != nil {
		return models.Payment{}, models.ErrNotFound
	}
	var payment models.Payment
	err = db.Where("id = ? AND order_id = ?", paymentID, order.ID).Take(&payment).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return models.Payment{}, models.ErrNotFound
	}
	return payment, err
}

// RefundRequests are the requests for a refund of the order, oldest first.
func (s Store) RefundRequests(ctx context.Context, orderID string) ([]models.RefundRequest, error) {
	var reqs []models.RefundRequest
	err := s.DB.WithContext(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&reqs).Error
	return reqs, err
}
