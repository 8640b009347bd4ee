package models

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/problem"
)

// RequestState is where a shopper's request for a refund stands.
type RequestState string

const (
	RequestOpen      RequestState = "requested"
	RequestFulfilled RequestState = "fulfilled"
	RequestDeclined  RequestState = "declined"
)

// RefundRequest is a shopper asking for their paid order to be refunded:
// staff give the refund (which fulfils it) or decline it. An order has at
// most one request open.
type RefundRequest struct {
	ID        string       `gorm:"primaryKey;size:36"`
	OrderID   string       `gorm:"size:36;not null;index"`
	UserID    string       `gorm:"size:36;not null"`
	Reason    string       `gorm:"size:200;not null"`
	State     RequestState `gorm:"size:16;not null"`
	RefundID  *string      `gorm:"size:36"`
	CreatedAt time.Time    `gorm:"not null"`
	// DecidedBy is the staff user who declined the request, at DecidedAt,
	// for DeclineReason (migration 10); nil while it is open or fulfilled.
	DecidedBy     *string `gorm:"size:36"`
	DecidedAt     *time.Time
	DeclineReason string `gorm:"size:200;not null;default:''"`
}

func (RefundRequest) TableName() string { return "refund_requests" }

// ErrRequestOpen: a request for a refund of an order that has one open
// already. Not final: once staff have answered it, the shopper may ask again.
var ErrRequestOpen = Declare(&Error{Type: problem.Conflict, Message: "A refund of this order was already requested; the shop's staff will answer it.",
	Shopper: Words{Heading: "Already requested", Text: "You have already asked for a refund of this order; the shop's staff will answer it."}})

// RequestRefund records, through tx, the user's request for a refund of
// their charged order, with an optional reason.
func (s Shop) RequestRefund(tx *gorm.DB, userID, orderID, reason string, now time.Time) (RefundRequest, error) {
	order, err := ownOrder(tx, userID, orderID)
	if err != nil {
		return RefundRequest{}, err
	}
	if err := refunds.admits(order); err != nil {
		return RefundRequest{}, err
	}
	req := RefundRequest{ID: uuid.NewString(), OrderID: order.ID, UserID: userID, Reason: reason, State: RequestOpen, CreatedAt: now}
	err = tx.Create(&req).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return RefundRequest{}, ErrRequestOpen
	}
	if err == nil {
		err = Audit(tx, Entry{OrderID: order.ID, Action: ActionRefundRequested, SubjectID: req.ID, Reason: reason, At: now})
	}
	return req, err
}

// RefundRequests are the requests for a refund of the order, oldest first.
func (s Shop) RefundRequests(ctx context.Context, orderID string) ([]RefundRequest, error) {
	var reqs []RefundRequest
	err := s.DB.WithContext(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&reqs).Error
	return reqs, err
}

// fulfilRequest marks through tx the order's open request, if any, as
// fulfilled by the refund.
func fulfilRequest(tx *gorm.DB, refund Refund) error {
	return tx.Model(&RefundRequest{}).Where("order_id = ? AND state = ?", refund.OrderID, RequestOpen).
		Updates(map[string]any{"state": RequestFulfilled, "refund_id": refund.ID}).Error
}

// ErrNoOpenRequest: staff declined a request that is no longer open — it
// was fulfilled or declined meanwhile.
var ErrNoOpenRequest = Declare(&Error{Type: problem.Conflict, Message: "This refund request is no longer open: it was answered already.",
	Shopper: Words{Heading: "Already answered", Text: "This refund request was already answered; nothing was changed."}})

// DeclineRequest records through tx that the staff user by declines the
// order's open request for a refund, with a reason (ErrForbidden for anyone
// but staff, ErrNotFound when the order has no such request,
// ErrNoOpenRequest when it is no longer open).
func (s Shop) DeclineRequest(tx *gorm.DB, by User, orderID, requestID, reason string, now time.Time) (RefundRequest, error) {
	if !by.IsStaff() {
		return RefundRequest{}, ErrForbidden
	}
	if _, err := anyOrder(tx, orderID); err != nil {
		return RefundRequest{}, err
	}
	if err := knownID(requestID); err != nil {
		return RefundRequest{}, err
	}
	res := tx.Model(&RefundRequest{}).Where("id = ? AND order_id = ? AND state = ?", requestID, orderID, RequestOpen).
		Updates(map[string]any{"state": RequestDeclined, "decided_by": by.ID, "decided_at": now, "decline_reason": reason})
	if res.Error != nil {
		return RefundRequest{}, res.Error
	}
	if res.RowsAffected != 1 {
		return RefundRequest{}, noOpenRequest(tx, orderID, requestID)
	}
	if err := Audit(tx, Entry{OrderID: orderID, Action: ActionRequestDeclined, Actor: UserActor(by), SubjectID: requestID, Reason: reason, At: now}); err != nil {
		return RefundRequest{}, err
	}
	var req RefundRequest
	return req, tx.Where("id = ?", requestID).Take(&req).Error
}

// noOpenRequest is why no open request of the order was declined:
// ErrNotFound when the order has no request requestID, ErrNoOpenRequest
// when it was answered already.
func noOpenRequest(tx *gorm.DB, orderID, requestID string) error {
	var n int64
	if err := tx.Model(&RefundRequest{}).Where("id = ? AND order_id = ?", requestID, orderID).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return ErrNoOpenRequest
}
