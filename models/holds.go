package models

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// The order's hold: one run at a time may move money for an order — a
// payment, a refund, a resolution by the reconciler or a webhook. Every
// write of the money rule is fenced by it (see payments.go).

// takeHold gives the order's hold to holder until the given time, if it is
// free, already holder's, or lapsed; q may narrow the orders that qualify.
func takeHold(q *gorm.DB, orderID, holder string, now, until time.Time) (bool, error) {
	return takeHoldFrom(q, orderID, holder, holder, now, until)
}

// takeHoldFrom is takeHold that also takes the hold over from from.
func takeHoldFrom(q *gorm.DB, orderID, holder, from string, now, until time.Time) (bool, error) {
	res := q.Model(&Order{}).
		Where("id = ?", orderID).
		Where("held_by IS NULL OR held_by IN ? OR held_until <= ?", []string{holder, from}, now).
		Updates(map[string]any{"held_by": holder, "held_until": until})
	return res.RowsAffected == 1, res.Error
}

// awaitingHolder is who holds an order while its attempt waits for the
// shopper: the attempt itself, since no running request does.
func awaitingHolder(requestID string) string { return "awaiting/" + requestID }

// released is the update that lets go of an order's hold.
var released = map[string]any{"held_by": nil, "held_until": nil}

// ExtendHold moves the end of holder's hold on the order, if holder still
// holds it: a payment operation that is slow but alive keeps the order.
func (s Shop) ExtendHold(ctx context.Context, orderID, holder string, until time.Time) error {
	return s.DB.WithContext(ctx).Model(&Order{}).
		Where("id = ? AND held_by = ?", orderID, holder).
		Update("held_until", until).Error
}

// ReleaseHold lets go of holder's hold on the order, if it still has it.
func (s Shop) ReleaseHold(ctx context.Context, orderID, holder string) error {
	return s.DB.WithContext(ctx).Model(&Order{}).
		Where("id = ? AND held_by = ?", orderID, holder).
		Updates(released).Error
}

// NewHolder names one run that holds an order: who it is (a payment
// operation's derived key, "reconciler", or a webhook event's id) and a
// random token of the run, so that two runs of one operation differ.
func NewHolder(who string) string {
	return who + "/" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
}
