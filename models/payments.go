package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// The money rule: at most one successful charge per order, whatever keys
// are used. It rests on three writes, each fenced by the order's hold:
//
//   - BeginPayment takes the hold and, in the same transaction, records the
//     operation's attempt — but only if no earlier attempt of the order is
//     still in doubt. The provider is called after that commit.
//   - An attempt in doubt is resolved (Settle) before any other attempt of
//     the order may be written, by whoever holds the order: the next payment
//     operation, the reconciler or a webhook (HoldForResolution). Only the
//     provider's word on the attempt's own key resolves it: an outcome, or a
//     definitive refusal, which proves nothing was or will be charged under
//     that key (FailAttempt). A passing refusal of a later request under the
//     key ("rate limited", "unauthorized") says nothing about the first.
//   - A succeeded attempt marks the order paid in the transaction that
//     settles it, and a paid order takes no new attempt.
//
// A hold is taken by one run of an operation (holder, see NewHolder), not by
// the operation: a run that outlived its lease cannot write over the run
// that took over.

// PaymentStart is what BeginPayment found and did.
type PaymentStart struct {
	// Attempt is the attempt to send to the provider. When Unresolved is
	// false it is the operation's own, just recorded in doubt. When true,
	// it is an earlier attempt of the order still in doubt (perhaps the
	// operation's own, from a run that died): it must be resolved first.
	Attempt    PaymentAttempt
	Unresolved bool
}

// BeginPayment takes the hold on the user's order for holder, a run of the
// payment operation derivedKey, until the given time, and records its attempt to
// charge method for the order's total — both in one transaction. If an
// earlier attempt of the order is still in doubt, it records nothing new
// and hands that attempt back to be resolved, the hold taken.
func (s Shop) BeginPayment(ctx context.Context, userID, orderID, derivedKey, holder, method string, now, until time.Time) (PaymentStart, error) {
	var start PaymentStart
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		order, err := ownOrder(tx, userID, orderID)
		if err != nil {
			return err
		}
		switch {
		case order.Charged():
			return ErrOrderPaid
		case order.Status == OrderCancelled:
			return ErrOrderCancelled
		}
		held, err := takeHold(tx.Where("status = ?", OrderPending), order.ID, holder, now, until)
		if err != nil {
			return err
		}
		if !held {
			return busy(tx, order.ID)
		}
		var doubt PaymentAttempt
		err = tx.Where("order_id = ? AND state = ?", order.ID, AttemptInDoubt).Order("created_at, id").Take(&doubt).Error
		switch {
		case err == nil:
			start.Attempt, start.Unresolved = doubt, true
			return nil
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return err
		}
		start.Attempt, err = recordAttempt(tx, order, derivedKey, method, now)
		return err
	})
	return start, err
}

// recordAttempt writes the operation's attempt in doubt. The provider is
// called under the derived key itself the first time; after attempts the
// provider refused (failed: nothing charged), under the key and a number, because a provider that saved
// its refusal under a key answers every later request with that key — with
// other parameters, an idempotency error — and would never charge it.
func recordAttempt(tx *gorm.DB, order Order, derivedKey, method string, now time.Time) (PaymentAttempt, error) {
	var tried int64
	if err := tx.Model(&PaymentAttempt{}).Where("derived_key = ?", derivedKey).Count(&tried).Error; err != nil {
		return PaymentAttempt{}, err
	}
	providerKey := derivedKey
	if tried > 0 {
		providerKey = fmt.Sprintf("%s-%d", derivedKey, tried+1)
	}
	attempt := PaymentAttempt{
		ID: uuid.NewString(), OrderID: order.ID, DerivedKey: derivedKey, ProviderKey: providerKey, AmountCents: order.TotalCents,
		Currency: order.Currency, PaymentMethod: method, State: AttemptInDoubt, SentAt: &now,
	}
	err := tx.Create(&attempt).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		// Another run of the operation has just written the same attempt.
		return PaymentAttempt{}, ErrPaymentInProgress
	}
	return attempt, err
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

// Outcome is the provider's definite answer to an attempt.
type Outcome struct {
	Status        PaymentStatus
	ChargeID      string
	DeclineReason string
}

// Settle records the provider's answer to an attempt in doubt through tx,
// which the caller commits:
// the attempt resolved, a payment row, the order paid if the charge
// succeeded, and the hold released. holder must still hold the order,
// and the attempt must still be in doubt: otherwise another operation took
// the order over, or already recorded this answer, and nothing is written
// (ErrPaymentInProgress).
func (s Shop) Settle(tx *gorm.DB, attempt PaymentAttempt, outcome Outcome, holder string) (Payment, error) {
	state := AttemptDeclined
	if outcome.Status == PaymentSucceeded {
		state = AttemptSucceeded
	}
	// Already recorded: nothing to write. A read takes no lock.
	var current PaymentAttempt
	if err := tx.Select("state").Where("id = ?", attempt.ID).Take(&current).Error; err != nil {
		return Payment{}, err
	}
	if current.State != AttemptInDoubt {
		return Payment{}, ErrPaymentInProgress
	}
	// The order first, then the attempt: the order that BeginPayment and
	// HoldForResolution lock in, so that two transactions never wait on
	// each other. Only the hold's holder settles, so the attempt is still
	// in doubt when its row is locked; its condition is the last guard.
	update := map[string]any{"held_by": nil, "held_until": nil}
	if state == AttemptSucceeded {
		update["status"] = OrderPaid
	}
	res := tx.Model(&Order{}).Where("id = ? AND held_by = ?", attempt.OrderID, holder).Updates(update)
	if res.Error != nil {
		return Payment{}, res.Error
	}
	if res.RowsAffected != 1 {
		// The hold passed to another operation, which will resolve the
		// attempt itself: this one must not record anything.
		return Payment{}, ErrPaymentInProgress
	}
	res = tx.Model(&PaymentAttempt{}).Where("id = ? AND state = ?", attempt.ID, AttemptInDoubt).Updates(map[string]any{
		"state": state, "provider_charge_id": outcome.ChargeID, "decline_reason": outcome.DeclineReason,
	})
	if res.Error != nil {
		return Payment{}, res.Error
	}
	if res.RowsAffected != 1 {
		return Payment{}, ErrPaymentInProgress
	}
	payment := Payment{
		ID: uuid.NewString(), OrderID: attempt.OrderID, Status: outcome.Status, AmountCents: attempt.AmountCents,
		Currency: attempt.Currency, PaymentMethod: attempt.PaymentMethod, DeclineReason: outcome.DeclineReason,
		ProviderChargeID: outcome.ChargeID, ProviderKey: attempt.ProviderKey,
	}
	if err := tx.Create(&payment).Error; err != nil {
		return Payment{}, err
	}
	return payment, nil
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
	res := tx.Model(&PaymentAttempt{}).Where("id = ? AND state IN ?", attempt.ID, []AttemptState{AttemptFailed, AttemptDeclined}).
		Updates(map[string]any{"state": AttemptSucceeded, "provider_charge_id": outcome.ChargeID, "decline_reason": ""})
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
	err = tx.Where("provider_key = ?", attempt.ProviderKey).Take(&payment).Error
	if err == nil {
		payment.Status, payment.ProviderChargeID, payment.DeclineReason = PaymentSucceeded, outcome.ChargeID, ""
		if err := tx.Save(&payment).Error; err != nil {
			return Payment{}, err
		}
		return payment, updateRefunded(tx, attempt.OrderID)
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return Payment{}, err
	}
	payment = Payment{
		ID: uuid.NewString(), OrderID: attempt.OrderID, Status: PaymentSucceeded, AmountCents: attempt.AmountCents,
		Currency: attempt.Currency, PaymentMethod: attempt.PaymentMethod, ProviderChargeID: outcome.ChargeID, ProviderKey: attempt.ProviderKey,
	}
	if err := tx.Create(&payment).Error; err != nil {
		return Payment{}, err
	}
	// Paid, or still partly refunded: the late charge counts as charged.
	return payment, updateRefunded(tx, attempt.OrderID)
}

// FailAttempt records through tx that the provider charged nothing for an
// attempt in doubt, and never will under its key, and releases holder's
// hold, if holder still holds the order and the attempt is still in doubt.
// Only a run that got the provider's own word for it may call it: the first
// request's refusal, or a definitive refusal of the attempt's request.
func (s Shop) FailAttempt(tx *gorm.DB, attempt PaymentAttempt, holder string) error {
	res := tx.Model(&Order{}).Where("id = ? AND held_by = ?", attempt.OrderID, holder).Updates(released)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return ErrPaymentInProgress
	}
	res = tx.Model(&PaymentAttempt{}).Where("id = ? AND state = ?", attempt.ID, AttemptInDoubt).Update("state", AttemptFailed)
	if res.Error == nil && res.RowsAffected != 1 {
		return ErrPaymentInProgress
	}
	return res.Error
}

// AttemptsInDoubt counts the payment attempts in doubt, and tells when the
// oldest of them was made (zero when there is none).
func (s Shop) AttemptsInDoubt(ctx context.Context) (int64, time.Time, error) {
	db := s.DB.WithContext(ctx).Model(&PaymentAttempt{}).Where("state = ?", AttemptInDoubt)
	var n int64
	if err := db.Count(&n).Error; err != nil || n == 0 {
		return n, time.Time{}, err
	}
	// The oldest row rather than MIN(created_at): SQLite's aggregate loses
	// the column's time type.
	var oldest PaymentAttempt
	err := s.DB.WithContext(ctx).Select("created_at").Where("state = ?", AttemptInDoubt).Order("created_at").Take(&oldest).Error
	return n, oldest.CreatedAt, err
}

// AttemptByKey finds the attempt sent under a provider key.
func (s Shop) AttemptByKey(ctx context.Context, providerKey string) (PaymentAttempt, bool, error) {
	var attempt PaymentAttempt
	err := s.DB.WithContext(ctx).Where("provider_key = ?", providerKey).Take(&attempt).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return PaymentAttempt{}, false, nil
	}
	return attempt, err == nil, err
}

// MarkSent records that an attempt's request is being sent (again) now.
func (s Shop) MarkSent(ctx context.Context, attemptID string, now time.Time) error {
	return s.DB.WithContext(ctx).Model(&PaymentAttempt{}).Where("id = ?", attemptID).Update("sent_at", now).Error
}

// LastSent is when the attempt's request was last sent: its creation when
// no send was recorded (an attempt made before SentAt existed).
func (a PaymentAttempt) LastSent() time.Time {
	if a.SentAt != nil {
		return *a.SentAt
	}
	return a.CreatedAt
}
