package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// charges is the protocol's use for payments: a pending order, charged once.
var charges = Kind{
	admits: func(order models.Order) error {
		switch {
		case order.Charged():
			return models.ErrOrderPaid
		case order.Status == models.OrderCancelled:
			return models.ErrOrderCancelled
		}
		return nil
	},
	holdable: []string{models.OrderPending},
	inDoubt:  models.ErrPaymentInDoubt,
	awaiting: models.ErrPaymentAwaiting,
}

// Pay charges one of the user's orders with method: the one way to take
// money. A declined card is a payment too (Status declined).
func (s *Service) Pay(ctx context.Context, op Operation, userID, orderID, method string) (models.Payment, error) {
	return s.charges.run(ctx, op, orderID, func(ctx context.Context, holder string, now, until time.Time) (Begun[models.PaymentAttempt], error) {
		return s.shop.BeginPayment(ctx, userID, orderID, op.DerivedKey, holder, method, now, until)
	})
}

func (s *Service) chargeFlow() flow[models.PaymentAttempt, models.Payment] {
	return flow[models.PaymentAttempt, models.Payment]{
		s: s, by: byPayment, what: "attempt", noun: "payment attempt",
		answerOf: Ledger.PaymentOf,
		send: func(ctx context.Context, a models.PaymentAttempt) (Outcome, error) {
			charge, err := s.cfg.Provider.Charge(ctx, s.chargeRequest(a))
			return s.awaiting(ctx, a, chargeOutcome(charge)), err
		},
		find: func(ctx context.Context, a models.PaymentAttempt) (Outcome, bool, error) {
			charge, found, err := s.cfg.Provider.Find(ctx, s.chargeRequest(a))
			return s.awaiting(ctx, a, chargeOutcome(charge)), found, err
		},
		settle: s.shop.Settle, late: s.shop.settleLateCharge,
		errUnconfirmed: ErrUnconfirmed, errEarlierUnconfirmed: ErrEarlierUnconfirmed,
		errUnavailable: ErrProviderUnavailable, errInDoubt: models.ErrPaymentInDoubt,
	}
}

func (s *Service) chargeRequest(a models.PaymentAttempt) payments.ChargeRequest {
	return payments.ChargeRequest{IdempotencyKey: a.ProviderKey, OrderID: a.OrderID, AmountCents: a.AmountCents, Currency: a.Currency,
		PaymentMethod: a.PaymentMethod, ReturnURL: s.cfg.ReturnURL(a.OrderID), ChargeID: a.ProviderChargeID}
}

func chargeOutcome(charge payments.Charge) Outcome {
	return Outcome{State: charge.Status, ProviderID: charge.ID, Reason: charge.DeclineReason, NextActionURL: charge.NextActionURL}
}

// BeginPayment is begin of an attempt to charge the user's pending order's
// total to method.
func (s Ledger) BeginPayment(ctx context.Context, userID, orderID, derivedKey, holder, method string, now, until time.Time) (Begun[models.PaymentAttempt], error) {
	return begin(s.DB.WithContext(ctx), charges, orders.OwnedBy(userID), orderID, derivedKey, holder, now, until,
		func(_ *gorm.DB, order models.Order, req models.Request) (models.PaymentAttempt, error) {
			return models.PaymentAttempt{Request: req, AmountCents: order.TotalCents, Currency: order.Currency, PaymentMethod: method}, nil
		})
}

// PaymentOf is the payment one of the operation's attempts made, if any.
func (s Ledger) PaymentOf(ctx context.Context, derivedKey string) (models.Payment, bool, error) {
	payment, found, err := take[models.Payment](s.DB.WithContext(ctx).
		Where("provider_key IN (?)", s.DB.Model(&models.PaymentAttempt{}).Select("provider_key").Where("derived_key = ?", derivedKey)))
	if found && payment.Status == models.RequiresAction {
		var action models.PaymentAction
		action, _, err = s.ActionOf(ctx, payment.ProviderKey)
		payment.NextActionURL = action.URL
	}
	return payment, found && err == nil, err
}

// Settle is settle of an attempt, with its payment row unless nothing was
// charged; an answer that requires action hands the hold to the attempt.
func (s Ledger) Settle(tx *gorm.DB, attempt models.PaymentAttempt, outcome Outcome, holder string) (models.Payment, error) {
	if !slices.Contains([]models.State{models.Succeeded, models.Declined, models.Failed, models.RequiresAction}, outcome.State) {
		// Not an outcome: the attempt stays in doubt, to be asked again.
		return models.Payment{}, fmt.Errorf("models: %q is not the outcome of a charge", outcome.State)
	}
	order, update := orders.Released(), map[string]any{"state": outcome.State}
	switch outcome.State {
	case models.Succeeded:
		order["status"] = models.OrderPaid
	case models.RequiresAction:
		order = awaitingHold(attempt, outcome.Until)
	}
	if outcome.State != models.Failed {
		update["provider_charge_id"], update["decline_reason"] = outcome.ProviderID, outcome.Reason
	}
	if err := settle(tx, attempt, holder, order, update); err != nil {
		return models.Payment{}, err
	}
	if outcome.State == models.RequiresAction {
		action := models.PaymentAction{ProviderKey: attempt.ProviderKey, URL: outcome.NextActionURL, ExpiresAt: outcome.Until}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&action).Error; err != nil {
			return models.Payment{}, err
		}
	}
	payment, err := recordPayment(tx, attempt, outcome)
	if err == nil {
		err = chargeFacts(tx, payment, false)
	}
	if outcome.State == models.RequiresAction {
		payment.NextActionURL = outcome.NextActionURL
	}
	return payment, err
}

// awaitingHold is the order's hold while its attempt waits for the shopper:
// the attempt's own, until the authentication expires, then lapsed even if
// the shop crashed.
func awaitingHold(attempt models.PaymentAttempt, until time.Time) map[string]any {
	return map[string]any{"held_by": orders.AwaitingHolder(attempt.ID), "held_until": until}
}

// recordPayment writes the payment an answer makes, or updates under the
// same id the one an earlier answer made, so that its Location shows it.
func recordPayment(tx *gorm.DB, attempt models.PaymentAttempt, outcome Outcome) (models.Payment, error) {
	var payment models.Payment
	err := tx.Where("provider_key = ?", attempt.ProviderKey).Take(&payment).Error
	found := err == nil
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound) && outcome.State == models.Failed:
		return models.Payment{}, nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		payment = models.Payment{ID: uuid.NewString(), OrderID: attempt.OrderID, AmountCents: attempt.AmountCents,
			Currency: attempt.Currency, PaymentMethod: attempt.PaymentMethod, ProviderKey: attempt.ProviderKey}
	case err != nil:
		return models.Payment{}, err
	}
	payment.Status, payment.DeclineReason, payment.ProviderChargeID = outcome.State, outcome.Reason, outcome.ProviderID
	if outcome.State == models.Failed {
		payment.Status = models.Declined
	}
	if found {
		return payment, tx.Save(&payment).Error
	}
	return payment, tx.Create(&payment).Error
}

// ActionOf is what the attempt sent under providerKey asked of the shopper.
func (s Ledger) ActionOf(ctx context.Context, providerKey string) (models.PaymentAction, bool, error) {
	return take[models.PaymentAction](s.DB.WithContext(ctx).Where("provider_key = ?", providerKey))
}

// settleLateCharge records a charge reported for an attempt recorded failed
// or declined, and the order paid (perhaps twice) unless it was cancelled:
// that stays so (its units may be back on sale), for a person to refund.
func (s Ledger) settleLateCharge(tx *gorm.DB, attempt models.PaymentAttempt, outcome Outcome, holder string, now time.Time) (Late, error) {
	if outcome.State != models.Succeeded || (attempt.State != models.Failed && attempt.State != models.Declined) {
		return Late{}, nil
	}
	outcome.Reason = ""
	if err := settleLate(tx, attempt, holder, now, func() (map[string]any, error) {
		return map[string]any{"state": models.Succeeded, "provider_charge_id": outcome.ProviderID, "decline_reason": ""}, nil
	}); err != nil {
		return Late{}, err
	}
	payment, err := recordPayment(tx, attempt, outcome)
	if err != nil {
		return Late{}, err
	}
	var cancelled int64
	if err := tx.Model(&models.Order{}).Where("id = ? AND status = ?", attempt.OrderID, models.OrderCancelled).Count(&cancelled).Error; err != nil {
		return Late{}, err
	}
	todo := "refund it if the order was paid twice"
	if cancelled == 1 {
		todo = "the order was cancelled, and stays so: refund the charge"
	} else if err := updateRefunded(tx, attempt.OrderID); err != nil {
		return Late{}, err
	}
	late := Late{Moved: true, Label: "late_charge",
		Warning: "the provider charged a payment attempt the shop had recorded as " + string(attempt.State) + "; recorded now — " + todo}
	return late, chargeFacts(tx, payment, true)
}

// chargeFacts records, once the order is written, a payment's audit entry
// and event; one that waits for the shopper tells nothing yet.
func chargeFacts(tx *gorm.DB, p models.Payment, late bool) error {
	action := map[models.State]audit.Action{models.Succeeded: audit.ActionChargeSucceeded, models.Declined: audit.ActionChargeDeclined}[p.Status]
	if late {
		action = audit.ActionLateCharge // a charge the shop had recorded as refused or declined
	}
	if action == "" {
		return nil
	}
	if err := audit.Audit(tx, audit.Entry{OrderID: p.OrderID, Action: action, SubjectID: p.ID, AmountCents: audit.Cents(p.AmountCents), Reason: p.DeclineReason}); err != nil {
		return err
	}
	if p.Status == models.Succeeded {
		return orders.Paid(tx, p.ID, p.OrderID)
	}
	return orders.Event(tx, outbox.OrderPaymentDeclined, p.ID, p.OrderID)
}
