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
	res := q.Model(&Order{}).
		Where("id = ?", orderID).
		Where("held_by IS NULL OR held_by = ? OR held_until <= ?", holder, now).
		Updates(map[string]any{"held_by": holder, "held_until": until})
	return res.RowsAffected == 1, res.Error
}

// busy says why the order's hold could not be taken: paid meanwhile, an
// attempt in doubt at the provider, or another operation holding it.
func busy(tx *gorm.DB, orderID string) error {
	var order Order
	if err := tx.Select("status").Where("id = ?", orderID).Take(&order).Error; err != nil {
		return err
	}
	switch {
	case order.Charged():
		return ErrOrderPaid
	case order.Status == OrderCancelled:
		return ErrOrderCancelled
	}
	var doubts int64
	if err := tx.Model(&PaymentAttempt{}).Where("order_id = ? AND state = ?", orderID, AttemptInDoubt).Count(&doubts).Error; err != nil {
		return err
	}
	if doubts > 0 {
		return ErrPaymentInDoubt
	}
	return ErrPaymentInProgress
}

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

// StaleAttempts lists attempts in doubt whose order no live operation
// holds — their own operation died, lost its database link, or gave up —
// those asked about least recently first, so that an attempt the provider
// cannot answer does not keep the others waiting.
func (s Shop) StaleAttempts(ctx context.Context, now time.Time, limit int) ([]PaymentAttempt, error) {
	var attempts []PaymentAttempt
	err := s.DB.WithContext(ctx).Model(&PaymentAttempt{}).
		Joins("JOIN orders ON orders.id = payment_attempts.order_id").
		Where("payment_attempts.state = ?", AttemptInDoubt).
		Where("orders.held_by IS NULL OR orders.held_until <= ?", now).
		Order("payment_attempts.updated_at, payment_attempts.id").Limit(limit).
		Find(&attempts).Error
	return attempts, err
}

// HoldForResolution takes the hold of the attempt's order for holder, if
// no live operation holds it and the attempt is still in doubt, in one
// transaction, and marks the attempt asked about now. Many instances may
// call it at once for one attempt: one gets the hold.
func (s Shop) HoldForResolution(ctx context.Context, attemptID, holder string, now, until time.Time) (PaymentAttempt, bool, error) {
	var attempt PaymentAttempt
	held := false
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", attemptID).Take(&attempt).Error; err != nil {
			return err
		}
		if attempt.State != AttemptInDoubt {
			return nil
		}
		var err error
		if held, err = takeHold(tx, attempt.OrderID, holder, now, until); err != nil || !held {
			return err
		}
		// Read again under the hold: its last holder may have resolved it.
		if err := tx.Where("id = ?", attemptID).Take(&attempt).Error; err != nil {
			return err
		}
		if attempt.State != AttemptInDoubt {
			held = false
			return tx.Model(&Order{}).Where("id = ? AND held_by = ?", attempt.OrderID, holder).Updates(released).Error
		}
		return tx.Model(&PaymentAttempt{}).Where("id = ?", attemptID).Update("updated_at", now).Error
	})
	return attempt, held, err
}

// StaleRefunds lists refunds in doubt whose order no live operation holds,
// those asked about least recently first.
func (s Shop) StaleRefunds(ctx context.Context, now time.Time, limit int) ([]Refund, error) {
	var refunds []Refund
	err := s.DB.WithContext(ctx).Model(&Refund{}).
		Joins("JOIN orders ON orders.id = refunds.order_id").
		Where("refunds.state = ?", RefundInDoubt).
		Where("orders.held_by IS NULL OR orders.held_until <= ?", now).
		Order("refunds.updated_at, refunds.id").Limit(limit).
		Find(&refunds).Error
	return refunds, err
}

// HoldRefundForResolution takes the hold of the refund's order for holder,
// if no live operation holds it and the refund is still in doubt, and marks
// it asked about now; as HoldForResolution does for a payment attempt.
func (s Shop) HoldRefundForResolution(ctx context.Context, refundID, holder string, now, until time.Time) (Refund, bool, error) {
	var refund Refund
	held := false
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", refundID).Take(&refund).Error; err != nil || refund.State != RefundInDoubt {
			return err
		}
		var err error
		if held, err = takeHold(tx, refund.OrderID, holder, now, until); err != nil || !held {
			return err
		}
		if err := tx.Where("id = ?", refundID).Take(&refund).Error; err != nil {
			return err
		}
		if refund.State != RefundInDoubt {
			held = false
			return tx.Model(&Order{}).Where("id = ? AND held_by = ?", refund.OrderID, holder).Updates(released).Error
		}
		return tx.Model(&Refund{}).Where("id = ?", refundID).Update("updated_at", now).Error
	})
	return refund, held, err
}
