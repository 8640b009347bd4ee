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
	// SentAt is when the refund's request was last sent to the provider.
	SentAt    *time.Time
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
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
		start.Refund, err = recordRefund(tx, order, derivedKey, in, now)
		return err
	})
	return start, err
}

// recordRefund writes the operation's refund in doubt, of the order's
// first charge that still has something to refund (an order charged twice,
// by a late charge, has two), for what it asks — at most what that charge
// has left.
func recordRefund(tx *gorm.DB, order Order, derivedKey string, in RefundInput, now time.Time) (Refund, error) {
	charge, refundable, err := refundableCharge(tx, order.ID)
	if err != nil {
		return Refund{}, err
	}
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
		ChargeID: charge.ProviderChargeID, AmountCents: amount, Currency: charge.Currency, Reason: in.Reason, State: RefundInDoubt, SentAt: &now,
	}
	err = tx.Create(&refund).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return Refund{}, ErrPaymentInProgress
	}
	return refund, err
}

// refundableCharge is the order's first succeeded charge with something
// left to refund, and how much; the last charge and 0 when none has.
func refundableCharge(tx *gorm.DB, orderID string) (Payment, int64, error) {
	var charges []Payment
	if err := tx.Where("order_id = ? AND status = ?", orderID, PaymentSucceeded).Order("created_at, id").Find(&charges).Error; err != nil {
		return Payment{}, 0, err
	}
	if len(charges) == 0 {
		return Payment{}, 0, ErrOrderNotPaid
	}
	for _, charge := range charges {
		var given int64
		if err := tx.Model(&Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
			Where("payment_id = ? AND state IN ?", charge.ID, givingBack).Scan(&given).Error; err != nil {
			return Payment{}, 0, err
		}
		if left := charge.AmountCents - given; left > 0 {
			return charge, left, nil
		}
	}
	return charges[len(charges)-1], 0, nil
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
	return moveRefund(tx, refund, RefundPending, outcome)
}

// RecordLateRefund records a refund the provider reports succeeded although
// the shop had recorded it failed: the provider's word wins, so that the
// order shows what was given back.
func (s Shop) RecordLateRefund(tx *gorm.DB, refund Refund, outcome RefundOutcome) (bool, error) {
	return moveRefund(tx, refund, RefundFailed, outcome)
}

// moveRefund moves a refund from one answered state to the outcome's, and
// writes what the order has been given back. The order's row is locked
// first, as SettleRefund locks it, so that totals are never written from
// sums a concurrent settlement has changed.
func moveRefund(tx *gorm.DB, refund Refund, from RefundState, outcome RefundOutcome) (bool, error) {
	if err := tx.Model(&Order{}).Where("id = ?", refund.OrderID).Update("refunded_cents", gorm.Expr("refunded_cents")).Error; err != nil {
		return false, err
	}
	res := tx.Model(&Refund{}).Where("id = ? AND state = ?", refund.ID, from).
		Updates(map[string]any{"state": outcome.State, "failure_reason": outcome.FailureReason})
	if res.Error != nil || res.RowsAffected != 1 {
		return false, res.Error
	}
	return true, updateRefunded(tx, refund.OrderID)
}

// MarkRefundSent records that a refund's request is being sent (again) now.
func (s Shop) MarkRefundSent(ctx context.Context, refundID string, now time.Time) error {
	return s.DB.WithContext(ctx).Model(&Refund{}).Where("id = ?", refundID).Update("sent_at", now).Error
}

// LastSent is when the refund's request was last sent.
func (r Refund) LastSent() time.Time {
	if r.SentAt != nil {
		return *r.SentAt
	}
	return r.CreatedAt
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
