package models

// The reads of the API's listings and resources: pages of orders, one payment.

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Position is where a page of a newest-first listing ended: the creation
// time and id of its last row. The next page starts strictly after it, so
// rows inserted meanwhile (newer, hence before it) neither repeat nor shift
// what follows.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// after keeps the rows of a newest-first listing that come after p, when
// p is set.
func after(db *gorm.DB, p *Position) *gorm.DB {
	if p == nil {
		return db
	}
	return db.Where("created_at < ? OR (created_at = ? AND id < ?)", p.CreatedAt, p.CreatedAt, p.ID)
}

// OrdersPage lists up to limit of the user's orders, newest first, with
// their items and payments, from after p (from the newest when p is nil);
// more says whether any follow.
func (s Shop) OrdersPage(ctx context.Context, userID string, p *Position, limit int) (orders []Order, more bool, err error) {
	orders = []Order{}
	err = after(s.withLines(s.DB.WithContext(ctx)), p).Where("user_id = ?", userID).
		Order("created_at DESC, id DESC").Limit(limit + 1).Find(&orders).Error
	if len(orders) > limit {
		return orders[:limit], true, err
	}
	return orders, false, err
}

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
