package orders

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

// expireBatch bounds one sweep; the next takes the rest.
const expireBatch = 500

// cancellable narrows q to the orders that may be cancelled at now (the
// shopper's cancel, the staff's, the expiry sweep): pending, held by no live
// operation, with no payment attempt open. On PostgreSQL an UPDATE that waited
// re-checks the row, not the NOT EXISTS: enough, as an attempt opens only under a live hold.
func cancellable(q *gorm.DB, now time.Time) *gorm.DB {
	q = q.Where("orders.status = ?", models.OrderPending)
	return HoldFree(q, now).
		Where("NOT EXISTS (SELECT 1 FROM payment_attempts a WHERE a.order_id = orders.id AND a.state IN ?)", models.OpenStates)
}

// cancel cancels the order id if it may be (q may narrow further): one
// conditional statement, so that cancels racing cancel it once, and only
// the one that did audits it, gives its units back and records its event.
func cancel(tx, q *gorm.DB, id, reason string, actor audit.Actor, now time.Time) (bool, error) {
	update := Released()
	update["status"], update["cancel_reason"] = models.OrderCancelled, reason
	res := cancellable(q.Model(&models.Order{}).Where("orders.id = ?", id), now).Updates(update)
	if res.Error != nil || res.RowsAffected != 1 {
		return false, res.Error
	}
	if err := audit.Audit(tx, audit.Entry{OrderID: id, Action: audit.ActionOrderCancelled, Actor: actor, Reason: reason, At: now}); err != nil {
		return false, err
	}
	if err := release(tx, id, []string{models.OrderCancelled}, map[string]any{"restocked_at": now}, true); err != nil {
		return false, err
	}
	return true, Event(tx, outbox.OrderCancelled, id, id)
}

// CancelOrder cancels one of the user's orders, if it may be cancelled.
func (s Store) CancelOrder(tx *gorm.DB, userID, orderID string, now time.Time) (models.Order, error) {
	return s.cancelOrder(tx, OwnedBy(userID), models.CancelledByShopper, orderID, now)
}

// CancelAnyOrder is CancelOrder of any user's order, by staff alone.
func (s Store) CancelAnyOrder(tx *gorm.DB, by models.User, orderID string, now time.Time) (models.Order, error) {
	if err := accounts.StaffNow(tx, by.ID); err != nil {
		return models.Order{}, err
	}
	return s.cancelOrder(tx, AnyOrder, models.CancelledByStaff, orderID, now)
}

// cancelOrder cancels the order find finds; one already cancelled is
// answered as it stands.
func (s Store) cancelOrder(tx *gorm.DB, find Whose, reason, orderID string, now time.Time) (models.Order, error) {
	if _, err := find(tx, orderID); err != nil {
		return models.Order{}, err
	}
	cancelled, err := cancel(tx, tx, orderID, reason, audit.Actor{}, now)
	if err == nil && !cancelled {
		err = whyNotCancelled(tx, orderID)
	}
	if err != nil {
		return models.Order{}, err
	}
	return find(s.withLines(tx), orderID)
}

// whyNotCancelled says why the order may not be cancelled now, or nil when
// it already was.
func whyNotCancelled(tx *gorm.DB, orderID string) error {
	var order models.Order
	if err := tx.Select("status").Where("id = ?", orderID).Take(&order).Error; err != nil {
		return err
	}
	switch {
	case order.Status == models.OrderCancelled:
		return nil
	case order.Status != models.OrderPending:
		return models.ErrOrderPaid
	}
	var states []models.State
	err := tx.Model(&models.PaymentAttempt{}).Where("order_id = ? AND state IN ?", orderID, models.OpenStates).
		Distinct().Pluck("state", &states).Error
	switch {
	case err != nil:
		return err
	case slices.Contains(states, models.RequiresAction):
		return models.ErrPaymentAwaiting
	case len(states) > 0:
		return models.ErrPaymentInDoubt
	}
	return models.ErrPaymentInProgress
}

// ExpireOrders cancels the orders left unpaid since before the cutoff, each
// in its own transaction, and returns how many it expired.
func (s Store) ExpireOrders(ctx context.Context, cutoff, now time.Time) (int, error) {
	db := s.DB.WithContext(ctx)
	var ids []string
	err := cancellable(db.Model(&models.Order{}), now).Where("orders.created_at < ?", cutoff).
		Order("orders.created_at, orders.id").Limit(expireBatch).Pluck("orders.id", &ids).Error
	if err != nil {
		return 0, err
	}
	expired := 0
	for _, id := range ids {
		cancelled := false
		err := db.Transaction(func(tx *gorm.DB) (err error) {
			cancelled, err = cancel(tx, tx.Where("orders.created_at < ?", cutoff), id, models.CancelledExpired, audit.By(audit.ActorExpiry), now)
			return err
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
