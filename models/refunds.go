package models

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
)

// givingBack are the states whose amount is no longer refundable: given
// back, on its way, or perhaps given back (in doubt).
var givingBack = []State{InDoubt, Succeeded, Pending}

// Refund is one refund of an order's charge (see Request): committed with
// the order's hold before the provider is called, and resolved under its
// own key before any other refund of the order is sent, so that the sum of
// an order's refunds never exceeds its charge.
type Refund struct {
	Request
	PaymentID        string `gorm:"size:36;not null"`
	ChargeID         string `gorm:"size:64;not null"`
	AmountCents      int64  `gorm:"not null"`
	Currency         string `gorm:"size:3;not null"`
	Reason           string `gorm:"size:200"`
	ProviderRefundID string `gorm:"size:64"`
	FailureReason    string `gorm:"size:200"`
	// CreatedBy is the staff user who gave the refund; nil on the refunds
	// made before it was recorded (migration 5).
	CreatedBy *string `gorm:"size:36;-:migration"`
}

func (Refund) TableName() string { return "refunds" }

// refunds is the protocol's use for refunds: a charged order, given back at
// most what it was charged.
var refunds = Kind{
	admits: func(order Order) error {
		if !order.Charged() {
			return ErrOrderNotPaid
		}
		return nil
	},
	holdable: chargedStates,
	inDoubt:  ErrRefundInDoubt,
}

// RefundInput is what a refund asks for: an amount (all that is still
// refundable when nil) and a reason.
type RefundInput struct {
	AmountCents *int64
	Reason      string
}

// BeginRefund takes the hold on a charged order, any user's, for holder, a
// run of the refund operation derivedKey that the staff user by gives, and
// records its refund in doubt, in one transaction (ErrForbidden, and
// nothing written, when by is not staff): of the order's first charge that still has something to
// refund (an order charged twice, by a late charge, has two), for what it
// asks — at most what that charge has left. Or it hands back an earlier
// refund of the order still in doubt, to resolve first.
func (s Shop) BeginRefund(ctx context.Context, by User, orderID, derivedKey, holder string, in RefundInput, now, until time.Time) (Begun[Refund], error) {
	if !by.IsStaff() {
		return Begun[Refund]{}, ErrForbidden
	}
	return begin(s.DB.WithContext(ctx), refunds, anyOrder, orderID, derivedKey, holder, now, until,
		func(tx *gorm.DB, order Order, req Request) (Refund, error) {
			charge, refundable, err := refundableCharge(tx, order.ID)
			if err != nil {
				return Refund{}, err
			}
			amount := refundable
			if in.AmountCents != nil {
				amount = *in.AmountCents
			}
			if refundable <= 0 || amount > refundable {
				return Refund{}, exceeds(tx, order.ID)
			}
			if err := Audit(tx, Entry{OrderID: order.ID, Action: ActionRefundGiven, Actor: UserActor(by), SubjectID: req.ID, AmountCents: cents(amount), Reason: in.Reason, At: now}); err != nil {
				return Refund{}, err
			}
			return Refund{Request: req, PaymentID: charge.ID, ChargeID: charge.ProviderChargeID, AmountCents: amount, Currency: charge.Currency, Reason: in.Reason, CreatedBy: &by.ID}, nil
		})
}

// exceeds refuses a refund of more than is left: finally, unless a refund
// of the order is still pending, which may yet fail and give its amount back.
func exceeds(tx *gorm.DB, orderID string) error {
	var pending int64
	if err := tx.Model(&Refund{}).Where("order_id = ? AND state = ?", orderID, Pending).Count(&pending).Error; err != nil {
		return err
	}
	if pending > 0 {
		return ErrRefundExceeds.ForNow()
	}
	return ErrRefundExceeds
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
		left, err := leftOf(tx, charge)
		if err != nil || left > 0 {
			return charge, left, err
		}
	}
	return charges[len(charges)-1], 0, nil
}

// Refundable is what a refund of the order, any user's, may give back now,
// as BeginRefund reckons it: what its first charge with something left has
// left, refunds in doubt counted; 0 when the order is not charged.
func (s Shop) Refundable(ctx context.Context, orderID string) (int64, error) {
	tx := s.DB.WithContext(ctx)
	order, err := anyOrder(tx, orderID)
	if err != nil {
		return 0, err
	}
	if refunds.admits(order) != nil {
		return 0, nil
	}
	_, left, err := refundableCharge(tx, orderID)
	if errors.Is(err, ErrOrderNotPaid) {
		return 0, nil
	}
	return max(left, 0), err
}

// leftOf is what can still be refunded of a charge: refunds given back, on
// their way, or perhaps given back (in doubt) counted.
func leftOf(tx *gorm.DB, charge Payment) (int64, error) {
	var given int64
	err := tx.Model(&Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("payment_id = ? AND state IN ?", charge.ID, givingBack).Scan(&given).Error
	return charge.AmountCents - given, err
}

// SettleRefund records through tx the provider's answer to a refund in
// doubt, and what the order has been given back, and lets go of holder's
// hold — if holder still holds the order and the refund is still in doubt
// (ErrPaymentInProgress otherwise, and nothing is written).
func (s Shop) SettleRefund(tx *gorm.DB, refund Refund, outcome Outcome, holder string) (Refund, error) {
	update := map[string]any{"state": outcome.State, "provider_refund_id": outcome.ProviderID, "failure_reason": outcome.Reason}
	if err := settle(tx, refund, holder, released, update); err != nil {
		return Refund{}, err
	}
	refund.State, refund.ProviderRefundID, refund.FailureReason = outcome.State, outcome.ProviderID, outcome.Reason
	if err := auditRefund(tx, refund, outcome, false); err != nil {
		return Refund{}, err
	}
	if refund.State == Succeeded || refund.State == Pending {
		if err := fulfilRequest(tx, refund); err != nil {
			return Refund{}, err
		}
	}
	if err := updateRefunded(tx, refund.OrderID); err != nil {
		return Refund{}, err
	}
	return refund, refundEvent(tx, refund, refund.State)
}

// UpdateRefundState moves a refund the provider answered pending to its
// final state (an event's), and what the order has been given back.
func (s Shop) UpdateRefundState(tx *gorm.DB, refund Refund, outcome Outcome) (bool, error) {
	moved, err := moveRefund(tx, refund, Pending, outcome)
	if err == nil && moved {
		err = auditRefund(tx, refund, outcome, false)
	}
	return moved, err
}

// RecordLateRefund records a refund the provider reports succeeded although
// the shop had recorded it failed: the provider's word wins, so that every
// refund made is recorded. But the books never show more given back than
// was taken: if the charge has nothing left to give back (refunds in doubt
// counted), the money went back twice, and the refund is recorded Excess,
// for staff to recover, and not counted as given back. It reports the state
// recorded, or "" if the refund was no longer failed; ErrPaymentInProgress
// while another refund of the charge is unsettled.
func (s Shop) RecordLateRefund(tx *gorm.DB, refund Refund, outcome Outcome) (State, error) {
	if err := lockOrder(tx, refund.OrderID); err != nil {
		return "", err
	}
	// Decided on settled facts only: while another refund of the charge is
	// in doubt or pending, the event waits for the provider's next delivery.
	var unsettled int64
	if err := tx.Model(&Refund{}).Where("payment_id = ? AND id <> ? AND state IN ?", refund.PaymentID, refund.ID, []State{InDoubt, Pending}).
		Count(&unsettled).Error; err != nil || unsettled > 0 {
		return "", errors.Join(err, ErrPaymentInProgress)
	}
	var charge Payment
	if err := tx.Where("id = ?", refund.PaymentID).Take(&charge).Error; err != nil {
		return "", err
	}
	left, err := leftOf(tx, charge)
	if err != nil {
		return "", err
	}
	if refund.AmountCents > left {
		outcome.State = Excess
	}
	moved, err := moveRefund(tx, refund, Failed, outcome)
	if err != nil || !moved {
		return "", err
	}
	return outcome.State, auditRefund(tx, refund, outcome, true)
}

// moveRefund moves a refund from one answered state to the outcome's, and
// writes what the order has been given back. The order's row is locked
// first, as SettleRefund locks it, so that totals are never written from
// sums a concurrent settlement has changed.
func moveRefund(tx *gorm.DB, refund Refund, from State, outcome Outcome) (bool, error) {
	if err := lockOrder(tx, refund.OrderID); err != nil {
		return false, err
	}
	res := tx.Model(&Refund{}).Where("id = ? AND state = ?", refund.ID, from).
		Updates(map[string]any{"state": outcome.State, "failure_reason": outcome.Reason, "provider_refund_id": gorm.Expr("COALESCE(NULLIF(?, ''), provider_refund_id)", outcome.ProviderID)})
	if res.Error != nil || res.RowsAffected != 1 {
		return false, res.Error
	}
	if err := updateRefunded(tx, refund.OrderID); err != nil {
		return false, err
	}
	return true, refundEvent(tx, refund, outcome.State)
}

// lockOrder locks the order's row, as the settling transactions do first.
func lockOrder(tx *gorm.DB, orderID string) error {
	return tx.Model(&Order{}).Where("id = ?", orderID).Update("refunded_cents", gorm.Expr("refunded_cents")).Error
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
		Where("order_id = ? AND state IN ?", orderID, []State{Succeeded, Pending}).Scan(&totals.Refunded).Error; err != nil {
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
	err := s.DB.WithContext(ctx).Where("derived_key = ? AND state IN ?", derivedKey, []State{Succeeded, Pending}).
		Order("created_at DESC, id DESC").Take(&refund).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Refund{}, false, nil
	}
	return refund, err == nil, err
}

// OrderRefund finds one refund of an order the user may see: their own, or
// for staff any user's.
func (s Shop) OrderRefund(ctx context.Context, user User, orderID, refundID string) (Refund, error) {
	if _, err := ordersOf(user)(s.DB.WithContext(ctx), orderID); err != nil {
		return Refund{}, err
	}
	var refund Refund
	err := s.DB.WithContext(ctx).Where("id = ? AND order_id = ? AND state IN ?", refundID, orderID, []State{Succeeded, Pending}).Take(&refund).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Refund{}, ErrNotFound
	}
	return refund, err
}
