package billing

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// given are the states of a refund that gives back; givingBack also in
// doubt: their amount is no longer refundable.
var (
	given      = []models.State{models.Succeeded, models.Pending}
	givingBack = []models.State{models.InDoubt, models.Succeeded, models.Pending}
)

// refunds is the protocol's use for refunds: a charged order.
var refunds = Kind{
	admits: func(order models.Order) error {
		if !order.Charged() {
			return models.ErrOrderNotPaid
		}
		return nil
	},
	holdable: models.ChargedStates,
	inDoubt:  models.ErrRefundInDoubt,
}

// RefundInput is a refund's amount (all that is left when nil) and reason.
type RefundInput struct {
	AmountCents *int64
	Reason      string
}

// Refund gives back the amount asked on any user's charged order, by the
// staff user by. A refund the provider failed is a refund too.
func (s *Service) Refund(ctx context.Context, op Operation, by models.User, orderID string, in RefundInput) (models.Refund, error) {
	return s.refunds.run(ctx, op, orderID, func(ctx context.Context, holder string, now, until time.Time) (Begun[models.Refund], error) {
		return s.shop.BeginRefund(ctx, by, orderID, op.DerivedKey, holder, in, now, until)
	})
}

func (s *Service) refundFlow() flow[models.Refund, models.Refund] {
	return flow[models.Refund, models.Refund]{
		s: s, by: byRefund, prefix: "refund_", what: "refund", noun: "refund",
		answerOf: Ledger.RefundOf,
		send: func(ctx context.Context, r models.Refund) (Outcome, error) {
			answer, err := s.cfg.Provider.Refund(ctx, refundRequest(r))
			return refundOutcome(answer), err
		},
		find: func(ctx context.Context, r models.Refund) (Outcome, bool, error) {
			answer, found, err := s.cfg.Provider.FindRefund(ctx, refundRequest(r))
			return refundOutcome(answer), found, err
		},
		settle: s.shop.SettleRefund, late: s.shop.settleLateRefund, refusalAnswers: true,
		refused:        "The payment provider refused the refund.",
		unavailable:    "The payment provider was unavailable: nothing was given back.",
		noRecord:       "The payment provider has no record of the refund: nothing was given back.",
		errUnconfirmed: ErrRefundUnconfirmed, errEarlierUnconfirmed: ErrEarlierRefundUnconfirmed,
		errUnavailable: ErrRefundUnavailable, errInDoubt: models.ErrRefundInDoubt,
	}
}

func refundRequest(r models.Refund) payments.RefundRequest {
	return payments.RefundRequest{IdempotencyKey: r.ProviderKey, ChargeID: r.ChargeID, OrderID: r.OrderID, AmountCents: r.AmountCents, Currency: r.Currency}
}

func refundOutcome(a payments.RefundAnswer) Outcome {
	return Outcome{State: a.State, ProviderID: a.ID, Reason: a.FailureReason}
}

// BeginRefund is begin of a refund by the staff user by (staff in the
// database now) of the order's first charge with something left.
func (s Ledger) BeginRefund(ctx context.Context, by models.User, orderID, derivedKey, holder string, in RefundInput, now, until time.Time) (Begun[models.Refund], error) {
	staffs := func(tx *gorm.DB, orderID string) (models.Order, error) {
		if err := accounts.StaffNow(tx, by.ID); err != nil {
			return models.Order{}, err
		}
		return orders.AnyOrder(tx, orderID)
	}
	return begin(s.DB.WithContext(ctx), refunds, staffs, orderID, derivedKey, holder, now, until,
		func(tx *gorm.DB, order models.Order, req models.Request) (models.Refund, error) {
			charge, refundable, err := refundableCharge(tx, order.ID)
			if err != nil {
				return models.Refund{}, err
			}
			amount := refundable
			if in.AmountCents != nil {
				amount = *in.AmountCents
			}
			if refundable <= 0 || amount > refundable {
				return models.Refund{}, exceeds(tx, order.ID)
			}
			if err := audit.Audit(tx, audit.Entry{OrderID: order.ID, Action: audit.ActionRefundGiven, Actor: audit.UserActor(by),
				SubjectID: req.ID, AmountCents: audit.Cents(amount), Reason: in.Reason, At: now}); err != nil {
				return models.Refund{}, err
			}
			return models.Refund{Request: req, PaymentID: charge.ID, ChargeID: charge.ProviderChargeID, AmountCents: amount,
				Currency: charge.Currency, Reason: in.Reason, CreatedBy: &by.ID}, nil
		})
}

// exceeds refuses a refund of more than is left: finally, unless a pending
// refund may yet fail and give its amount back.
func exceeds(tx *gorm.DB, orderID string) error {
	var pending int64
	if err := tx.Model(&models.Refund{}).Where("order_id = ? AND state = ?", orderID, models.Pending).Count(&pending).Error; err != nil {
		return err
	}
	if pending > 0 {
		return models.ErrRefundExceeds.ForNow()
	}
	return models.ErrRefundExceeds
}

// refundableCharge is the order's first charge with something left, and
// how much; the last charge and 0 when none has.
func refundableCharge(tx *gorm.DB, orderID string) (models.Payment, int64, error) {
	var charges []models.Payment
	if err := tx.Where("order_id = ? AND status = ?", orderID, models.Succeeded).Order("created_at, id").Find(&charges).Error; err != nil {
		return models.Payment{}, 0, err
	}
	if len(charges) == 0 {
		return models.Payment{}, 0, models.ErrOrderNotPaid
	}
	for _, charge := range charges {
		left, err := leftOf(tx, charge)
		if err != nil || left > 0 {
			return charge, left, err
		}
	}
	return charges[len(charges)-1], 0, nil
}

// Refundable is what a refund of the order may give back now.
func (s Ledger) Refundable(ctx context.Context, orderID string) (int64, error) {
	tx := s.DB.WithContext(ctx)
	order, err := orders.AnyOrder(tx, orderID)
	if err != nil {
		return 0, err
	}
	if refunds.admits(order) != nil {
		return 0, nil
	}
	_, left, err := refundableCharge(tx, orderID)
	if errors.Is(err, models.ErrOrderNotPaid) {
		return 0, nil
	}
	return max(left, 0), err
}

// leftOf is what can still be refunded of a charge (givingBack counted).
func leftOf(tx *gorm.DB, charge models.Payment) (int64, error) {
	var given int64
	err := tx.Model(&models.Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("payment_id = ? AND state IN ?", charge.ID, givingBack).Scan(&given).Error
	return charge.AmountCents - given, err
}

// SettleRefund is settle of a refund, and of what the order got back.
func (s Ledger) SettleRefund(tx *gorm.DB, refund models.Refund, outcome Outcome, holder string) (models.Refund, error) {
	update := map[string]any{"state": outcome.State, "provider_refund_id": outcome.ProviderID, "failure_reason": outcome.Reason}
	if err := settle(tx, refund, holder, orders.Released(), update); err != nil {
		return models.Refund{}, err
	}
	refund.State, refund.ProviderRefundID, refund.FailureReason = outcome.State, outcome.ProviderID, outcome.Reason
	if refund.State == models.Succeeded || refund.State == models.Pending {
		if err := fulfilRequest(tx, refund); err != nil {
			return models.Refund{}, err
		}
	}
	if err := updateRefunded(tx, refund.OrderID); err != nil {
		return models.Refund{}, err
	}
	return refund, refundFacts(tx, refund, outcome, false)
}

// settleLateRefund records a pending refund's end, or a refund made that was
// recorded failed: Excess, for staff to recover, if its charge had nothing
// left, so the books never show more given back than taken.
func (s Ledger) settleLateRefund(tx *gorm.DB, refund models.Refund, outcome Outcome, holder string, now time.Time) (Late, error) {
	late := refund.State == models.Failed && outcome.State == models.Succeeded
	if !late && (refund.State != models.Pending || outcome.State == models.Pending) {
		return Late{}, nil
	}
	err := settleLate(tx, refund, holder, now, func() (map[string]any, error) {
		if late {
			excess, err := exceedsCharge(tx, refund)
			if err != nil {
				return nil, err
			}
			if excess {
				outcome.State = models.Excess
			}
		}
		return map[string]any{"state": outcome.State, "failure_reason": outcome.Reason,
			"provider_refund_id": gorm.Expr("COALESCE(NULLIF(?, ''), provider_refund_id)", outcome.ProviderID)}, nil
	})
	if err == nil {
		err = updateRefunded(tx, refund.OrderID)
	}
	if err == nil {
		err = refundFacts(tx, refund, outcome, late)
	}
	const made = "the provider made a refund the shop had recorded as failed"
	switch {
	case err != nil || !late:
		return Late{Moved: err == nil}, err
	case outcome.State == models.Excess:
		return Late{Moved: true, Label: "late_refund_excess",
			Warning: made + ", of a charge already given back in full: money given back twice; recorded as excess, for staff to recover"}, nil
	}
	return Late{Moved: true, Label: "late_refund", Warning: made + "; recorded now"}, nil
}

// exceedsCharge reports whether a refund is more than its charge has left,
// once the charge's other refunds are settled.
func exceedsCharge(tx *gorm.DB, refund models.Refund) (bool, error) {
	var unsettled int64
	if err := tx.Model(&models.Refund{}).Where("payment_id = ? AND id <> ? AND state IN ?", refund.PaymentID, refund.ID,
		[]models.State{models.InDoubt, models.Pending}).Count(&unsettled).Error; err != nil || unsettled > 0 {
		return false, errors.Join(err, models.ErrPaymentInProgress)
	}
	var charge models.Payment
	if err := tx.Where("id = ?", refund.PaymentID).Take(&charge).Error; err != nil {
		return false, err
	}
	left, err := leftOf(tx, charge)
	return refund.AmountCents > left, err
}

// updateRefunded writes what the order's refunds give back, and its state.
func updateRefunded(tx *gorm.DB, orderID string) error {
	var charged, refunded int64
	if err := tx.Model(&models.Payment{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("order_id = ? AND status = ?", orderID, models.Succeeded).Scan(&charged).Error; err != nil {
		return err
	}
	if err := tx.Model(&models.Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("order_id = ? AND state IN ?", orderID, given).Scan(&refunded).Error; err != nil {
		return err
	}
	status := models.OrderPaid
	switch {
	case refunded >= charged:
		status = models.OrderRefunded
	case refunded > 0:
		status = models.OrderPartiallyRefunded
	}
	return tx.Model(&models.Order{}).Where("id = ?", orderID).Updates(map[string]any{"status": status, "refunded_cents": refunded}).Error
}

// RefundOf is the refund, succeeded or pending, the operation made.
func (s Ledger) RefundOf(ctx context.Context, derivedKey string) (models.Refund, bool, error) {
	return take[models.Refund](s.DB.WithContext(ctx).Where("derived_key = ? AND state IN ?", derivedKey, given).
		Order("created_at DESC, id DESC"))
}

// OrderRefund finds one refund of an order the user may see.
func (s Ledger) OrderRefund(ctx context.Context, user models.User, orderID, refundID string) (models.Refund, error) {
	if _, err := orders.OrdersOf(user)(s.DB.WithContext(ctx), orderID); err != nil {
		return models.Refund{}, err
	}
	refund, found, err := take[models.Refund](s.DB.WithContext(ctx).Where("id = ? AND order_id = ? AND state IN ?", refundID, orderID, given))
	if err == nil && !found {
		err = models.ErrNotFound
	}
	return refund, err
}

// refundFacts records a refund's audit entry and, once it succeeded or
// failed for good, its event.
func refundFacts(tx *gorm.DB, r models.Refund, outcome Outcome, late bool) error {
	actions := map[models.State]audit.Action{models.Succeeded: audit.ActionRefundSucceeded, models.Pending: audit.ActionRefundPending, models.Failed: audit.ActionRefundFailed}
	if late {
		actions = map[models.State]audit.Action{models.Succeeded: audit.ActionLateRefund, models.Excess: audit.ActionRefundExcess}
	}
	if action := actions[outcome.State]; action != "" {
		if err := audit.Audit(tx, audit.Entry{OrderID: r.OrderID, Action: action, SubjectID: r.ID, AmountCents: audit.Cents(r.AmountCents), Reason: outcome.Reason}); err != nil {
			return err
		}
	}
	events := map[models.State]string{models.Succeeded: outbox.OrderRefunded, models.Failed: outbox.OrderRefundFailed}
	if event := events[outcome.State]; event != "" {
		return orders.Event(tx, event, r.ID, r.OrderID)
	}
	return nil
}
