package models

import "time"

// PaymentAttempt is one charge request sent, or about to be sent, to the
// provider (see Request): an attempt in doubt is resolved by sending its
// exact request again under its own key, which the provider answers with
// the first outcome. Succeeded and declined attempts have a payment row.
type PaymentAttempt struct {
	Request
	AmountCents      int64  `gorm:"not null"`
	Currency         string `gorm:"size:3;not null"`
	PaymentMethod    string `gorm:"size:64;not null"`
	ProviderChargeID string `gorm:"size:64"`
	DeclineReason    string `gorm:"size:200"`
}

// PaymentAction is what an attempt that requires action asks of the
// shopper: where to authenticate, and until when (the order's hold lasts as
// long). Keyed by the attempt's provider key, as its payment is.
type PaymentAction struct {
	ProviderKey string    `gorm:"primaryKey;size:90"`
	URL         string    `gorm:"size:2048;not null"`
	ExpiresAt   time.Time `gorm:"not null"`
}

func (PaymentAttempt) TableName() string { return "payment_attempts" }
