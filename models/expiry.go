package models

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/outbox"
)

// DefaultOrderExpiry is how long an order may wait unpaid before the sweep
// cancels it and its units come back (ORDER_EXPIRY).
const DefaultOrderExpiry = 30 * time.Minute

// expireBatch bounds the orders one sweep looks at; the next sweep takes
// the rest.
const expireBatch = 500

// expirable narrows q to the orders the sweep may cancel at now: pending,
// placed before the cutoff, held by no live payment operation, and with
// no payment attempt still open (in doubt, or awaiting the shopper's
// authentication after its hold lapsed). A charge may still land on any other: it
// waits until its attempt settles, and a later sweep expires it if it is
// still pending then.
func expirable(q *gorm.DB, cutoff, now time.Time) *gorm.DB {
	return q.Where("orders.status = ? AND orders.created_at < ?", OrderPending, cutoff).
		Where("orders.held_by IS NULL OR orders.held_until <= ?", now).
		Where("NOT EXISTS (SELECT 1 FROM payment_attempts a WHERE a.order_id = orders.id AND a.state IN ?)", open)
}

// ExpireOrders cancels the orders left unpaid since before the cutoff, as
// of now, and gives their units back to stock: the reason is
// CancelledExpired. Each order is cancelled by one conditional statement,
// so instances sweeping at once, or a shopper cancelling meanwhile, cancel
// it once, and its units come back once (returnStock, the shopper's cancel
// path). It returns how many orders it expired.
func (s Shop) ExpireOrders(ctx context.Context, cutoff, now time.Time) (int, error) {
	db := s.DB.WithContext(ctx)
	var ids []string
	err := expirable(db.Model(&Order{}), cutoff, now).Order("orders.created_at, orders.id").
		Limit(expireBatch).Pluck("orders.id", &ids).Error
	if err != nil {
		return 0, err
	}
	expired := 0
	for _, id := range ids {
		cancelled := false
		err := db.Transaction(func(tx *gorm.DB) error {
			res := expirable(tx.Model(&Order{}).Where("orders.id = ?", id), cutoff, now).
				Updates(map[string]any{"status": OrderCancelled, "cancel_reason": CancelledExpired, "held_by": nil, "held_until": nil})
			if res.Error != nil || res.RowsAffected != 1 {
				return res.Error // paid, cancelled or held meanwhile: not this sweep's
			}
			cancelled = true
			if err := returnStock(tx, id, now); err != nil {
				return err
			}
			return event(tx, outbox.OrderCancelled, id, id)
		})
		if err != nil {
			return expired, err
		}
		if cancelled {
			expired++
		}
	}
	return expired, nil
}
