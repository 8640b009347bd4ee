package billing

import (
	"gorm.io/gorm"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
)

// chargeFacts records what a payment the provider answered for good tells,
// once the order is written: its audit entry and its event (paid or
// declined). One that still waits for the shopper tells nothing yet.
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

// refundFacts records where the provider's answer took a refund: its audit
// entry (late, for a refund the shop had recorded as failed) and, once it
// succeeded or failed for good, its event. A pending one is on its way; an
// excess one is the staff's to recover, not given back.
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
	switch outcome.State {
	case models.Succeeded:
		return orders.Event(tx, outbox.OrderRefunded, r.ID, r.OrderID)
	case models.Failed:
		return orders.Event(tx, outbox.OrderRefundFailed, r.ID, r.OrderID)
	}
	return nil
}
