package models

// Refund is one refund of an order's charge (see Request): committed with
// the order's hold before the provider is called, and resolved under its
// own key before any other refund of the order is sent, so that the sum of
// an order's refunds never exceeds its charge.
type Refund struct {
	Request
	PaymentID        string `gorm:"size:36;not null"`
	ChargeID         string `gorm:"size:64;not null"`
	AmountCents      int64  `gorm:"not null"`
	Currency         string `gorm:"size:3;not null"`
	Reason           string `gorm:"size:200"`
	ProviderRefundID string `gorm:"size:64"`
	FailureReason    string `gorm:"size:200"`
	// CreatedBy is the staff user who gave the refund; nil on the refunds
	// made before it was recorded (migration 5).
	CreatedBy *string `gorm:"size:36;-:migration"`
}

func (Refund) TableName() string { return "refunds" }
