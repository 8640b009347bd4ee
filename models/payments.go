package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// PaymentAttempt is one charge request sent, or about to be sent, to the
// provider (see Request): an attempt in doubt is resolved by sending its
// exact request again under its own key, which the provider answers with
// the first outcome. Succeeded and declined attempts have a payment row.
type PaymentAttempt struct {
	Request
	AmountCents      int64  `gorm:"not null"`
	Currency         string `gorm:"size:3;not null"`
	PaymentMethod    string `gorm:"size:64;not null"`
	ProviderChargeID string `gorm:"size:64"`
	DeclineReason    string `gorm:"size:200"`
}

func (PaymentAttempt) TableName() string { return "payment_attempts" }

// charges is the protocol's use for payments: a pending order, charged at
// most once.
var charges = Kind{
	admits: func(order Order) error {
		switch {
		case order.Charged():
			return ErrOrderPaid
		case order.Status == OrderCancelled:
			return ErrOrderCancelled
		}
		return nil
	},
	holdable: []string{OrderPending},
	inDoubt:  ErrPaymentInDoubt,
}

// BeginPayment takes the hold on the user's pending order for holder, a run
// of the payment operation derivedKey, and records its attempt to charge
// method for the order's total, in one transaction; or hands back an
// earlier attempt of the order still in doubt, to resolve first.
func (s Shop) BeginPayment(ctx context.Context, userID, orderID, derivedKey, holder, method string, now, until time.Time) (Begun[PaymentAttempt], error) {
	return begin(s.DB.WithContext(ctx), charges, userID, orderID, derivedKey, holder, now, until,
		func(_ *gorm.DB, order Order, req Request) (PaymentAttempt, error) {
			return PaymentAttempt{Request: req, AmountCents: order.TotalCents, Currency: order.Currency, PaymentMethod: method}, nil
		})
}

// PaymentOf is the payment recorded for the operation derivedKey — by the
// provider's answer to one of its attempts — if there is one.
func (s Shop) PaymentOf(ctx context.Context, derivedKey string) (Payment, bool, error) {
	var payment Payment
	err := s.DB.WithContext(ctx).
		Where("provider_key IN (?)", s.DB.Model(&PaymentAttempt{}).Select("provider_key").Where("derived_key = ?", derivedKey)).
		Take(&payment).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Payment{}, false, nil
	}
	return payment, err == nil, err
}

// Settle records through tx, which the caller commits, the provider's
// answer to an attempt in doubt: the attempt resolved, the hold let go, and,
// unless the provider charged nothing (Failed), a payment row, the order
// paid if the charge succeeded. holder must still hold the order, and the
// attempt must still be in doubt (ErrPaymentInProgress otherwise, and
// nothing is written).
func (s Shop) Settle(tx *gorm.DB, attempt PaymentAttempt, outcome Outcome, holder string) (Payment, error) {
	if !slices.Contains([]State{Succeeded, Declined, Failed}, outcome.State) {
		// Not an outcome: the attempt stays in doubt, to be asked again.
		return Payment{}, fmt.Errorf("models: %q is not the outcome of a charge", outcome.State)
	}
	order := map[string]any{"held_by": nil, "held_until": nil}
	if outcome.State == Succeeded {
		order["status"] = OrderPaid
	}
	update := map[string]any{"state": outcome.State}
	if outcome.State != Failed {
		update["provider_charge_id"], update["decline_reason"] = outcome.ProviderID, outcome.Reason
	}
	if err := settle(tx, attempt, holder, order, update); err != nil || outcome.State == Failed {
		return Payment{}, err
	}
	payment := Payment{
		ID: uuid.NewString(), OrderID: attempt.OrderID, Status: PaymentStatus(outcome.State), AmountCents: attempt.AmountCents,
		Currency: attempt.Currency, PaymentMethod: attempt.PaymentMethod, DeclineReason: outcome.Reason,
		ProviderChargeID: outcome.ProviderID, ProviderKey: attempt.ProviderKey,
	}
	return payment, tx.Create(&payment).Error
}

// RecordLateCharge records, through tx, a charge the provider reports for
// an attempt the shop had recorded as refused (failed) or declined: the
// provider's word wins, so that every charge taken is recorded. It takes the
// order's hold for holder (ErrPaymentInProgress when a live operation has
// it), marks the attempt succeeded, records its payment as succeeded and
// marks the order paid — the order may then show two succeeded payments, one
// of them to refund.
func (s Shop) RecordLateCharge(tx *gorm.DB, attempt PaymentAttempt, outcome Outcome, holder string, now time.Time) (Payment, error) {
	held, err := takeHold(tx, attempt.OrderID, holder, now, now)
	if err != nil {
		return Payment{}, err
	}
	if !held {
		return Payment{}, ErrPaymentInProgress
	}
	res := tx.Model(&PaymentAttempt{}).Where("id = ? AND state IN ?", attempt.ID, []State{Failed, Declined}).
		Updates(map[string]any{"state": Succeeded, "provider_charge_id": outcome.ProviderID, "decline_reason": ""})
	if res.Error != nil {
		return Payment{}, res.Error
	}
	if res.RowsAffected != 1 {
		return Payment{}, ErrPaymentInProgress
	}
	if err := tx.Model(&Order{}).Where("id = ?", attempt.OrderID).Updates(released).Error; err != nil {
		return Payment{}, err
	}
	// A declined attempt has its payment row already: it becomes the charge,
	// under the same id, so that the declined answer's Location shows it.
	var payment Payment
	switch err := tx.Where("provider_key = ?", attempt.ProviderKey).Take(&payment).Error; {
	case errors.Is(err, gorm.ErrRecordNotFound):
		payment = Payment{ID: uuid.NewString(), OrderID: attempt.OrderID, AmountCents: attempt.AmountCents,
			Currency: attempt.Currency, PaymentMethod: attempt.PaymentMethod, ProviderKey: attempt.ProviderKey}
	case err != nil:
		return Payment{}, err
	}
	payment.Status, payment.ProviderChargeID, payment.DeclineReason = PaymentSucceeded, outcome.ProviderID, ""
	if err := tx.Save(&payment).Error; err != nil {
		return Payment{}, err
	}
	// Paid, or still partly refunded: the late charge counts as charged.
	return payment, updateRefunded(tx, attempt.OrderID)
}

// AttemptsInDoubt counts the payment attempts in doubt, and tells when the
// oldest of them was made (zero when there is none).
func (s Shop) AttemptsInDoubt(ctx context.Context) (int64, time.Time, error) {
	db := s.DB.WithContext(ctx).Model(&PaymentAttempt{}).Where("state = ?", InDoubt)
	var n int64
	if err := db.Count(&n).Error; err != nil || n == 0 {
		return n, time.Time{}, err
	}
	// The oldest row rather than MIN(created_at): SQLite's aggregate loses
	// the column's time type.
	var oldest PaymentAttempt
	err := s.DB.WithContext(ctx).Select("created_at").Where("state = ?", InDoubt).Order("created_at").Take(&oldest).Error
	return n, oldest.CreatedAt, err
}
