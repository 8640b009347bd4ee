// Package models holds the shop's data: its row types, their states, the
// API's JSON views of them and the catalogue of named errors.
package models

import (
	"slices"
	"time"
)

// Order states. An order is pending until it is paid or cancelled; once
// paid, refunds make it partially_refunded, then refunded.
const (
	OrderPending           = "pending"
	OrderPaid              = "paid"
	OrderPartiallyRefunded = "partially_refunded"
	OrderRefunded          = "refunded"
	OrderCancelled         = "cancelled"
)

// Why an order was cancelled.
const (
	CancelledByShopper = "shopper" // its shopper cancelled it
	CancelledExpired   = "expired" // nobody paid it in time (ORDER_EXPIRY)
	CancelledByStaff   = "staff"   // the shop's staff cancelled it (the console)
)

// ChargedStates are the states of an order that was charged.
var ChargedStates = []string{OrderPaid, OrderPartiallyRefunded, OrderRefunded}

// User is a customer, or one of the shop's staff. Email is stored
// lower-cased; only a bcrypt hash of the password is kept.
type User struct {
	ID           string    `gorm:"primaryKey;size:36"`
	Email        string    `gorm:"size:254;not null;uniqueIndex"`
	PasswordHash string    `gorm:"size:100;not null"`
	CreatedAt    time.Time `gorm:"not null"`
	// Role is read only: every account starts a shopper (the column's
	// default), and only SetRole, from the staff command, changes it.
	Role Role `gorm:"->;-:migration"`
}

// Role is what a user may do: shop, or also run the shop.
type Role string

const (
	Shopper Role = "shopper"
	Staff   Role = "staff"
)

// IsStaff reports whether the user is one of the shop's staff.
func (u User) IsStaff() bool { return u.Role == Staff }

// APIToken is a bearer token of a user, stored as its SHA-256 alone (a leaked
// database leaks no working token). It works until ExpiresAt or its revocation.
type APIToken struct {
	ID        uint      `gorm:"primaryKey"`
	UserID    string    `gorm:"size:36;not null;index"`
	TokenHash string    `gorm:"size:64;not null;uniqueIndex"`
	CreatedAt time.Time `gorm:"not null"`
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// Product is an item of the catalog.
type Product struct {
	ID         string `gorm:"primaryKey;size:36"`
	SKU        string `gorm:"size:64;not null;uniqueIndex"`
	Name       string `gorm:"size:200;not null"`
	PriceCents int64  `gorm:"not null"`
	Currency   string `gorm:"size:3;not null"`
	// Stock is what a shopper can buy (available), never below 0; Held is
	// what unpaid orders reserved. On hand is their sum, as Shopify counts.
	// Both are sums over the product's StockSlots: its own row (slot 0) and,
	// for a product split for a flash sale, rows of stock_slots.
	Stock      int `gorm:"not null"`
	Held       int `gorm:"not null"`
	StockSlots int `gorm:"not null;default:1"`
}

// OnHand is the units the shop has.
func (p Product) OnHand() int { return p.Stock + p.Held }

// Order is one checkout. DerivedKey, the request's key as the middleware derived
// it, is unique: a re-run never creates a second order, whatever else failed.
type Order struct {
	ID         string      `gorm:"primaryKey;size:36"`
	Number     int64       `gorm:"uniqueIndex"` // "Order #1042": sequential from FirstOrderNumber
	UserID     string      `gorm:"size:36;not null;index:idx_orders_user_created,priority:1"`
	Status     string      `gorm:"size:24;not null"`
	Currency   string      `gorm:"size:3;not null"`
	TotalCents int64       `gorm:"not null"`
	DerivedKey string      `gorm:"size:80;not null;uniqueIndex"`
	Items      []OrderItem `gorm:"constraint:OnDelete:CASCADE"`
	Payments   []Payment   `gorm:"constraint:OnDelete:CASCADE"`
	// Attempts are the provider calls made for the order, in doubt or
	// resolved: the shop's own record that money may be moving.
	Attempts      []PaymentAttempt `gorm:"constraint:OnDelete:CASCADE"`
	Refunds       []Refund         `gorm:"constraint:OnDelete:CASCADE"`
	RefundedCents int64            `gorm:"not null;default:0"` // what succeeded and pending refunds give back
	// HeldBy names the one run (see NewHolder) that may reach the provider
	// for the order and record its answer, until HeldUntil.
	HeldBy       *string `gorm:"size:100"`
	HeldUntil    *time.Time
	CancelReason string `gorm:"size:24;not null"` // why it was cancelled: Cancelled…; "" until then
	// RestockedAt is when a cancelled order's units came back to stock.
	RestockedAt *time.Time
	// StockReserved: the order's units are held until it is paid or
	// cancelled, which clears it once. The last release's orders held none.
	StockReserved bool      `gorm:"not null;default:false"`
	CreatedAt     time.Time `gorm:"not null;index:idx_orders_user_created,priority:2"`
}

// Charged reports whether the order was paid, whatever was refunded since.
func (o Order) Charged() bool { return slices.Contains(ChargedStates, o.Status) }

// AwaitingAction is the order's payment that waits for the shopper to
// authenticate, if any.
func (o Order) AwaitingAction() *Payment {
	if i := slices.IndexFunc(o.Payments, func(p Payment) bool { return p.Status == RequiresAction }); i >= 0 {
		return &o.Payments[i]
	}
	return nil
}

// PaymentInDoubt reports an attempt of the order still waiting for the
// provider's outcome: the order cannot be charged again until it is known.
func (o Order) PaymentInDoubt() bool {
	return slices.ContainsFunc(o.Attempts, func(a PaymentAttempt) bool { return a.State == InDoubt })
}

// OrderItem is one line of an order, the product's name and price copied.
type OrderItem struct {
	ID             uint   `gorm:"primaryKey"`
	OrderID        string `gorm:"size:36;not null;index"`
	ProductID      string `gorm:"size:36;not null"`
	SKU            string `gorm:"size:64;not null"`
	Name           string `gorm:"size:200;not null"`
	UnitPriceCents int64  `gorm:"not null"`
	Quantity       int    `gorm:"not null"`
	Slot           int    `gorm:"not null;default:0"` // the stock slot holding its units
}

// Payment is one attempt the provider answered, declined ones included; its
// unique ProviderKey records the provider's deduplicated answer at most once.
type Payment struct {
	ID               string    `gorm:"primaryKey;size:36"`
	OrderID          string    `gorm:"size:36;not null;index"`
	Status           State     `gorm:"size:16;not null"`
	AmountCents      int64     `gorm:"not null"`
	Currency         string    `gorm:"size:3;not null"`
	PaymentMethod    string    `gorm:"size:64;not null"`
	DeclineReason    string    `gorm:"size:200"`
	ProviderChargeID string    `gorm:"size:64;not null"`
	ProviderKey      string    `gorm:"size:90;not null;uniqueIndex"`
	CreatedAt        time.Time `gorm:"not null"`
	NextActionURL    string    `gorm:"-"` // where to authenticate: a PaymentAction, not a column
}

// RequestState is where a shopper's request for a refund stands.
type RequestState string

const (
	RequestOpen      RequestState = "requested"
	RequestFulfilled RequestState = "fulfilled"
	RequestDeclined  RequestState = "declined"
)

// RefundRequest is a shopper asking for their paid order to be refunded, which
// staff give (fulfilling it) or decline. An order has at most one open.
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

// Receipt is one email sent to a shopper for one event; its MessageID is
// derived from the event id, so a resend after a crash is the same message.
type Receipt struct {
	EventID   string `gorm:"primaryKey;size:100"`
	OrderID   string `gorm:"size:36;not null"`
	MessageID string `gorm:"size:200;not null"`
	Recipient string `gorm:"size:254;not null"`
	SentAt    time.Time
}

func (Receipt) TableName() string { return "receipts" }

// DeliveryState is how a webhook delivery stands: pending until the endpoint
// accepts it (2xx), failed once refused or timed out WEBHOOK_MAX_ATTEMPTS times.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	DeliveryFailed    DeliveryState = "failed"
)

// WebhookDelivery is one event owed to the merchant's endpoint, its ID the
// event's (webhook-id), held by one sender (ClaimedBy) until ClaimedUntil.
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
