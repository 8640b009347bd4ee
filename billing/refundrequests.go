package billing

// A shopper's request for a refund, which staff answer: by a refund, which
// fulfils it, or by declining it.

import (
	"cmp"
	"errors"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/problem"
)

// ErrRequestOpen: the order has a request open; not final.
var ErrRequestOpen = models.Declare(&models.Error{Type: problem.Conflict, Name: "request-open",
	Message: "A refund of this order was already requested; the shop's staff will answer it."})

// RequestRefund records the user's request for a refund of their order.
func (s Ledger) RequestRefund(tx *gorm.DB, userID, orderID, reason string, now time.Time) (models.RefundRequest, error) {
	order, err := orders.OwnOrder(tx, userID, orderID)
	if err != nil {
		return models.RefundRequest{}, err
	}
	if err := refunds.admits(order); err != nil {
		return models.RefundRequest{}, err
	}
	req := models.RefundRequest{ID: uuid.NewString(), OrderID: order.ID, UserID: userID, Reason: reason, State: models.RequestOpen, CreatedAt: now}
	err = tx.Create(&req).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return models.RefundRequest{}, ErrRequestOpen
	}
	if err == nil {
		err = audit.Audit(tx, audit.Entry{OrderID: order.ID, Action: audit.ActionRefundRequested, SubjectID: req.ID, Reason: reason, At: now})
	}
	return req, err
}

// fulfilRequest marks the order's open request fulfilled by the refund.
func fulfilRequest(tx *gorm.DB, refund models.Refund) error {
	return tx.Model(&models.RefundRequest{}).Where("order_id = ? AND state = ?", refund.OrderID, models.RequestOpen).
		Updates(map[string]any{"state": models.RequestFulfilled, "refund_id": refund.ID}).Error
}

// ErrNoOpenRequest: staff declined a request answered meanwhile.
var ErrNoOpenRequest = models.Declare(&models.Error{Type: problem.Conflict, Name: "request-answered",
	Message: "This refund request is no longer open: it was answered already."})

// DeclineRequest records that the staff user by declines the order's open
// request for a refund, with a reason.
func (s Ledger) DeclineRequest(tx *gorm.DB, by models.User, orderID, requestID, reason string, now time.Time) (models.RefundRequest, error) {
	if err := accounts.StaffNow(tx, by.ID); err != nil {
		return models.RefundRequest{}, err
	}
	if _, err := orders.AnyOrder(tx, orderID); err != nil {
		return models.RefundRequest{}, err
	}
	if err := orders.KnownID(requestID); err != nil {
		return models.RefundRequest{}, err
	}
	res := tx.Model(&models.RefundRequest{}).Where("id = ? AND order_id = ? AND state = ?", requestID, orderID, models.RequestOpen).
		Updates(map[string]any{"state": models.RequestDeclined, "decided_by": by.ID, "decided_at": now, "decline_reason": reason})
	if res.Error != nil {
		return models.RefundRequest{}, res.Error
	}
	if res.RowsAffected != 1 { // none such, or answered already
		_, found, err := take[models.RefundRequest](tx.Where("id = ? AND order_id = ?", requestID, orderID))
		if err == nil && !found {
			err = models.ErrNotFound
		}
		return models.RefundRequest{}, cmp.Or[error](err, ErrNoOpenRequest)
	}
	if err := audit.Audit(tx, audit.Entry{OrderID: orderID, Action: audit.ActionRequestDeclined, Actor: audit.UserActor(by), SubjectID: requestID, Reason: reason, At: now}); err != nil {
		return models.RefundRequest{}, err
	}
	var req models.RefundRequest
	return req, tx.Where("id = ?", requestID).Take(&req).Error
}
