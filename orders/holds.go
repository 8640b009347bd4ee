package orders

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// The order's hold, its one home: one run at a time may move money for an
// order (a payment, a refund, the reconciler, a webhook), and a cancel
// waits until nobody holds it. Every write of the money rule is fenced by it.

// HoldFree narrows q to the orders nobody holds at now, or whose lease lapsed.
func HoldFree(q *gorm.DB, now time.Time) *gorm.DB {
	return q.Where("orders.held_by IS NULL OR orders.held_until <= ?", now)
}

// TakeHold gives the order's hold to holder until the given time, if it is
// free, already holder's, or lapsed; q may narrow the orders that qualify.
func TakeHold(q *gorm.DB, orderID, holder string, now, until time.Time) (bool, error) {
	return TakeHoldFrom(q, orderID, holder, holder, now, until)
}

// TakeHoldFrom is TakeHold that also takes the hold over from from.
func TakeHoldFrom(q *gorm.DB, orderID, holder, from string, now, until time.Time) (bool, error) {
	res := q.Model(&models.Order{}).Where("id = ?", orderID).
		Where("held_by IS NULL OR held_by IN ? OR held_until <= ?", []string{holder, from}, now).
		Updates(map[string]any{"held_by": holder, "held_until": until})
	return res.RowsAffected == 1, res.Error
}

// AwaitingPrefix starts an AwaitingHolder; SQL matches it in held_by.
const AwaitingPrefix = "awaiting/"

// AwaitingHolder holds an order while its attempt waits for the shopper:
// the attempt itself, since no running request does.
func AwaitingHolder(requestID string) string { return AwaitingPrefix + requestID }

// Released is the update that lets go of an order's hold.
func Released() map[string]any { return map[string]any{"held_by": nil, "held_until": nil} }

// ExtendHold moves the end of holder's holds, which an operation's run took
// under the middleware's name for it: one update through the held_by index
// (migration 14), at each extension of the run's lease.
func ExtendHold(ctx context.Context, db *gorm.DB, holder string, until time.Time) error {
	return db.WithContext(ctx).Model(&models.Order{}).Where("held_by = ?", holder).Update("held_until", until).Error
}

// ReleaseHold lets go of holder's hold on the order, if it still has it.
func ReleaseHold(ctx context.Context, db *gorm.DB, orderID, holder string) error {
	return db.WithContext(ctx).Model(&models.Order{}).Where("id = ? AND held_by = ?", orderID, holder).
		Updates(Released()).Error
}

// NewHolder names one run: who it is ("reconciler", a webhook event's id)
// and a random token of the run. An operation's run is named by the
// middleware (its derived key and a token of the run), which extends its hold.
func NewHolder(who string) string {
	return who + "/" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
}
