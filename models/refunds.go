package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// RefundState is where a refund stands with the provider: in doubt from
// the moment it is written, before the provider is called, until the
// provider answers; then succeeded or pending (money on its way back),
// or failed (nothing was given back).
type RefundState string

const (
	RefundInDoubt   RefundState = "in_doubt"
	RefundSucceeded RefundState = "succeeded"
	RefundPending   RefundState = "pending"
	RefundFailed    RefundState = "failed"
)

// givingBack are the states whose amount is no longer refundable: given
// back, on its way, or perhaps given back (in doubt).
var givingBack = []RefundState{RefundInDoubt, RefundSucceeded, RefundPending}

// Refund is one refund of an order's charge, sent or about to be sent to
// the provider under ProviderKey. Like a payment attempt, it is committed
// with the order's hold before the provider is called, so that a refund in
// doubt is resolved under its own key before any other refund of the order
// is sent: the sum of an order's refunds never exceeds its charge.
type Refund struct {
	ID        string `gorm:"primaryKey;size:36"`
	OrderID   string `gorm:"size:36;not null;index"`
	PaymentID string `gorm:"size:36;not null"`
	// DerivedKey is the refund operation's; ProviderKey the key the
	// provider was called with (the derived key, numbered after refusals).
	DerivedKey       string      `gorm:"size:80;not null;index"`
	ProviderKey      string      `gorm:"size:90;not null;uniqueIndex"`
	ChargeID         string      `gorm:"size:64;not null"`
	AmountCents      int64       `gorm:"not null"`
	Currency         string      `gorm:"size:3;not null"`
	Reason           string      `gorm:"size:200"`
	State            RefundState `gorm:"size:16;not null;index"`
	ProviderRefundID string      `gorm:"size:64"`
	FailureReason    string      `gorm:"size:200"`
	CreatedAt        time.Time   `gorm:"not null"`
	UpdatedAt        time.Time   `gorm:"not null"`
}

// RefundStart is what BeginRefund found and did: the refund to send, just
// recorded in doubt, or, when Unresolved, an earlier refund of the order
// still in doubt, to resolve first.
type RefundStart struct {
	Refund     Refund
	Unresolved bool
}

// RefundInput is what a refund asks for: an amount (all that is still
// refundable when nil) and a reason.
type RefundInput struct {
	AmountCents *int64
	Reason      string
}

// BeginRefund takes the hold on the user's charged order for holder, a run
// of the refund operation derivedKey, and records its refund in doubt — in
// one transaction — unless an earlier refund of the order is in doubt,
// which it hands back to be resolved first. An amount beyond what is still
// refundable (refunds in doubt count as given back) is refused, and
// nothing is written.
func (s Shop) BeginRefund(ctx context.Context, userID, orderID, derivedKey, holder string, in RefundInput, now, until time.Time) (RefundStart, error) {
	var start RefundStart
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		order, err := ownOrder(tx, userID, orderID)
		if err != nil {
			return err
		}
		if !order.Charged() {
			return ErrOrderNotPaid
		}
		held, err := takeHold(tx.Where("status IN ?", chargedStates), order.ID, holder, now, until)
		if err != nil {
			return err
		}
		if !held {
			return ErrPaymentInProgress
		}
		var doubt Refund
		err = tx.Where("order_id = ? AND state = ?", order.ID, RefundInDoubt).Order("created_at, id").Take(&doubt).Error
		switch {
		case err == nil:
			start.Refund, start.Unresolved = doubt, true
			return nil
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return err
		}
		start.Refund, err = recordRefund(tx, order, derivedKey, in)
		return err
	})
	return start, err
}

// recordRefund writes the operation's refund in doubt, of the order's
// charge, for what it asks — at most what is still refundable.
func recordRefund(tx *gorm.DB, order Order, derivedKey string, in RefundInput) (Refund, error) {
	var charge Payment
	if err := tx.Where("order_id = ? AND status = ?", order.ID, PaymentSucceeded).Order("created_at, id").Take(&charge).Error; err != nil {
		return Refund{}, err
	}
	var given int64
	if err := tx.Model(&Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("payment_id = ? AND state IN ?", charge.ID, givingBack).Scan(&given).Error; err != nil {
		return Refund{}, err
	}
	refundable := charge.AmountCents - given
	amount := refundable
	if in.AmountCents != nil {
		amount = *in.AmountCents
	}
	if refundable <= 0 || amount > refundable {
		return Refund{}, ErrRefundExceeds
	}
	var tried int64
	if err := tx.Model(&Refund{}).Where("derived_key = ?", derivedKey).Count(&tried).Error; err != nil {
		return Refund{}, err
	}
	providerKey := derivedKey
	if tried > 0 {
		providerKey = fmt.Sprintf("%s-%d", derivedKey, tried+1)
	}
	refund := Refund{
		ID: uuid.NewString(), OrderID: order.ID, PaymentID: charge.ID, DerivedKey: derivedKey, ProviderKey: providerKey,
		ChargeID: charge.ProviderChargeID, AmountCents: amount, Currency: charge.Currency, Reason: in.Reason, State: RefundInDoubt,
	}
	err := tx.Create(&refund).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return Refund{}, ErrPaymentInProgress
	}
	return refund, err
}

// RefundOutcome is the provider's answer to a refund.
type RefundOutcome struct {
	State            RefundState // RefundSucceeded, RefundPending or RefundFailed
	ProviderRefundID string
	FailureReason    string
}

// SettleRefund records through tx the provider's answer to a refund in
// doubt, and what the order has been given back, and releases holder's
// hold — if holder still holds the order and the refund is still in doubt
// (ErrPaymentInProgress otherwise, and nothing is written).
func (s Shop) SettleRefund(tx *gorm.DB, refund Refund, outcome RefundOutcome, holder string) (Refund, error) {
	res := tx.Model(&Order{}).Where("id = ? AND held_by = ?", refund.OrderID, holder).Updates(released)
	if res.Error != nil {
		return Refund{}, res.Error
	}
	if res.RowsAffected != 1 {
		return Refund{}, ErrPaymentInProgress
	}
	res = tx.Model(&Refund{}).Where("id = ? AND state = ?", refund.ID, RefundInDoubt).Updates(map[string]any{
		"state": outcome.State, "provider_refund_id": outcome.ProviderRefundID, "failure_reason": outcome.FailureReason,
	})
	if res.Error != nil {
		return Refund{}, res.Error
	}
	if res.RowsAffected != 1 {
		return Refund{}, ErrPaymentInProgress
	}
	refund.State, refund.ProviderRefundID, refund.FailureReason = outcome.State, outcome.ProviderRefundID, outcome.FailureReason
	return refund, updateRefunded(tx, refund.OrderID)
}

// UpdateRefundState moves a refund the provider answered pending to its
// final state (an event's), and what the order has been given back.
func (s Shop) UpdateRefundState(tx *gorm.DB, refund Refund, outcome RefundOutcome) (bool, error) {
	res := tx.Model(&Refund{}).Where("id = ? AND state = ?", refund.ID, RefundPending).
		Updates(map[string]any{"state": outcome.State, "failure_reason": outcome.FailureReason})
	if res.Error != nil || res.RowsAffected != 1 {
		return false, res.Error
	}
	return true, updateRefunded(tx, refund.OrderID)
}

// updateRefunded writes what the order's succeeded and pending refunds give
// back, and its state: paid, partially_refunded or refunded.
func updateRefunded(tx *gorm.DB, orderID string) error {
	var totals struct{ Charged, Refunded int64 }
	if err := tx.Model(&Payment{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("order_id = ? AND status = ?", orderID, PaymentSucceeded).Scan(&totals.Charged).Error; err != nil {
		return err
	}
	if err := tx.Model(&Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("order_id = ? AND state IN ?", orderID, []RefundState{RefundSucceeded, RefundPending}).Scan(&totals.Refunded).Error; err != nil {
		return err
	}
	status := OrderPaid
	switch {
	case totals.Refunded >= totals.Charged:
		status = OrderRefunded
	case totals.Refunded > 0:
		status = OrderPartiallyRefunded
	}
	return tx.Model(&Order{}).Where("id = ?", orderID).Updates(map[string]any{"status": status, "refunded_cents": totals.Refunded}).Error
}

// RefundOf is the refund the operation derivedKey made, succeeded or
// pending, if there is one. (A failed one gave nothing back: its answer is
// the stored one, or the operation tries again under a new provider key.)
func (s Shop) RefundOf(ctx context.Context, derivedKey string) (Refund, bool, error) {
	var refund Refund
	err := s.DB.WithContext(ctx).Where("derived_key = ? AND state IN ?", derivedKey, []RefundState{RefundSucceeded, RefundPending}).
		Order("created_at DESC, id DESC").Take(&refund).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Refund{}, false, nil
	}
	return refund, err == nil, err
}

// RefundByKey finds the refund sent under a provider key.
func (s Shop) RefundByKey(ctx context.Context, providerKey string) (Refund, bool, error) {
	var refund Refund
	err := s.DB.WithContext(ctx).Where("provider_key = ?", providerKey).Take(&refund).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Refund{}, false, nil
	}
	return refund, err == nil, err
}

// OrderRefund finds one refund of one of the user's orders.
func (s Shop) OrderRefund(ctx context.Context, userID, orderID, refundID string) (Refund, error) {
	if _, err := ownOrder(s.DB.WithContext(ctx), userID, orderID); err != nil {
		return Refund{}, err
	}
	var refund Refund
	err := s.DB.WithContext(ctx).Where("id = ? AND order_id = ? AND state IN ?", refundID, orderID, []RefundState{RefundSucceeded, RefundPending}).Take(&refund).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Refund{}, ErrNotFound
	}
	return refund, err
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

// CancelOrder cancels one of the user's pending orders through tx, if no
// operation holds it and no payment attempt of it is in doubt: nothing was
// charged, and nothing can be any more.
func (s Shop) CancelOrder(tx *gorm.DB, userID, orderID string, now time.Time) (Order, error) {
	order, err := ownOrder(tx, userID, orderID)
	switch {
	case err != nil:
		return Order{}, err
	case order.Status == OrderCancelled:
		return order, nil
	case order.Status != OrderPending:
		return Order{}, ErrOrderPaid
	}
	// The order's row first, as BeginPayment takes it: the two serialize.
	res := tx.Model(&Order{}).Where("id = ? AND status = ?", order.ID, OrderPending).
		Where("held_by IS NULL OR held_until <= ?", now).
		Updates(map[string]any{"status": OrderCancelled, "held_by": nil, "held_until": nil})
	if res.Error != nil {
		return Order{}, res.Error
	}
	if res.RowsAffected != 1 {
		return Order{}, busy(tx, order.ID)
	}
	var doubts int64
	if err := tx.Model(&PaymentAttempt{}).Where("order_id = ? AND state = ?", order.ID, AttemptInDoubt).Count(&doubts).Error; err != nil {
		return Order{}, err
	}
	if doubts > 0 {
		return Order{}, ErrPaymentInDoubt
	}
	return ownOrder(s.withLines(tx), userID, orderID)
}
