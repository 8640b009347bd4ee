package models

import "time"

// Receipt is one email sent to a shopper for one event (order.paid or
// order.refunded). Its MessageID is derived from the event id, so a resend
// after a crash is the same message.
type Receipt struct {
	EventID   string `gorm:"primaryKey;size:100"`
	OrderID   string `gorm:"size:36;not null"`
	MessageID string `gorm:"size:200;not null"`
	Recipient string `gorm:"size:254;not null"`
	SentAt    time.Time
}

func (Receipt) TableName() string { return "receipts" }

// DeliveryState is how a webhook delivery stands: pending until the
// merchant's endpoint accepts it (2xx), or failed once it has refused or
// timed out WEBHOOK_MAX_ATTEMPTS times.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	DeliveryFailed    DeliveryState = "failed"
)

// WebhookDelivery is one event owed to the merchant's endpoint; its ID is
// the event's, sent as webhook-id, so the merchant can drop a duplicate.
// ClaimedBy holds it while one sender posts it, until ClaimedUntil.
type WebhookDelivery struct {
	ID            string        `gorm:"primaryKey;size:100"`
	EventType     string        `gorm:"size:40;not null"`
	OrderID       string        `gorm:"size:36;not null"`
	Body          string        `gorm:"not null"`
	State         DeliveryState `gorm:"size:16;not null"`
	Attempts      int           `gorm:"not null"`
	NextAttemptAt time.Time
	ClaimedBy     *string `gorm:"size:40"`
	ClaimedUntil  *time.Time
	CreatedAt     time.Time
	FinishedAt    *time.Time
	AttemptLog    []WebhookAttempt `gorm:"foreignKey:DeliveryID"`
}

func (WebhookDelivery) TableName() string { return "webhook_deliveries" }

// WebhookAttempt is one POST of a delivery: its status (0 when none came)
// and its error, if it failed.
type WebhookAttempt struct {
	ID          int64  `gorm:"primaryKey;autoIncrement"`
	DeliveryID  string `gorm:"size:100;not null"`
	AttemptedAt time.Time
	StatusCode  int    `gorm:"not null"`
	Error       string `gorm:"not null"`
}

func (WebhookAttempt) TableName() string { return "webhook_attempts" }
