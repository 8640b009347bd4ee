package billing

import (
	"gorm.io/gorm"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
)

// auditCharge records a payment the provider answered: a charge, or a
// card declined. A charge still waiting for the shopper is recorded when
// it ends.
func auditCharge(tx *gorm.DB, p models.Payment) error {
	action := map[models.State]audit.Action{models.Succeeded: audit.ActionChargeSucceeded, models.Declined: audit.ActionChargeDeclined}[p.Status]
	if action == "" {
		return nil
	}
	return audit.Audit(tx, audit.Entry{OrderID: p.OrderID, Action: action, SubjectID: p.ID, AmountCents: audit.Cents(p.AmountCents), Reason: p.DeclineReason})
}

// auditRefund records where the provider's answer took a refund; late,
// for a refund the shop had recorded as failed (settleLateRefund).
func auditRefund(tx *gorm.DB, r models.Refund, outcome Outcome, late bool) error {
	actions := map[models.State]audit.Action{models.Succeeded: audit.ActionRefundSucceeded, models.Pending: audit.ActionRefundPending, models.Failed: audit.ActionRefundFailed}
	if late {
		actions = map[models.State]audit.Action{models.Succeeded: audit.ActionLateRefund, models.Excess: audit.ActionRefundExcess}
	}
	action := actions[outcome.State]
	if action == "" {
		return nil
	}
	return audit.Audit(tx, audit.Entry{OrderID: r.OrderID, Action: action, SubjectID: r.ID, AmountCents: audit.Cents(r.AmountCents), Reason: outcome.Reason})
}
