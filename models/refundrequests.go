package models

import "time"

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
	// DecidedBy is the staff user who declined it; nil until then.
	DecidedBy     *string `gorm:"size:36"`
	DecidedAt     *time.Time
	DeclineReason string `gorm:"size:200;not null;default:''"`
}

func (RefundRequest) TableName() string { return "refund_requests" }
