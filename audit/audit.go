// Package audit records who did what: one entry per act, written in the
// act's own transaction with its actor, read back as an order's history, a
// shopper's activity and the traces of a user's operations.
package audit

import (
	"context"
	"errors"
	"time"

	"github.com/shop/shop/models"
	"gorm.io/gorm"
)

// Every money movement and every act of a shopper or staff leaves one
// entry, written through the act's own transaction: an act rolled back
// leaves none, and an act done once (a conditional write) leaves one.

// ActorKind is who acted: a user, or one of the shop's own resolvers.
type ActorKind string

const (
	ActorStaff          ActorKind = "staff"
	ActorShopper        ActorKind = "shopper"
	ActorReconciler     ActorKind = "reconciler"      // billing's reconcile pass
	ActorWebhook        ActorKind = "webhook"         // a provider's event
	ActorExpiry         ActorKind = "expiry"          // the sweep of unpaid orders
	ActorProviderReturn ActorKind = "provider_return" // the shopper's return from an authentication
)

// Actor is who acted; UserID is nil but for staff and shoppers.
type Actor struct {
	Kind   ActorKind `gorm:"column:kind;size:16;not null"`
	UserID *string   `gorm:"column:id;size:36"`
}

// UserActor is the user acting in their role: staff or shopper.
func UserActor(u models.User) Actor {
	id := u.ID
	if u.IsStaff() {
		return Actor{Kind: ActorStaff, UserID: &id}
	}
	return Actor{Kind: ActorShopper, UserID: &id}
}

func By(kind ActorKind) Actor { return Actor{Kind: kind} }

type actorKey struct{}

// WithActor is ctx carrying who acts in it, for Audit: the request's user,
// or the resolver that runs.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

type Action string

// The acts of users.
const (
	ActionOrderPlaced     Action = "order_placed"
	ActionOrderCancelled  Action = "order_cancelled" // the reason says by whom
	ActionRefundRequested Action = "refund_requested"
	ActionRequestDeclined Action = "request_declined"
	ActionRefundGiven     Action = "refund_given" // staff gave a refund, with its reason; its outcome follows
	ActionRestocked       Action = "restocked"
)

// The money movements, and the provider's answers that moved none.
const (
	ActionChargeSucceeded Action = "charge_succeeded"
	ActionChargeDeclined  Action = "charge_declined"
	ActionLateCharge      Action = "late_charge"
	ActionRefundSucceeded Action = "refund_succeeded"
	ActionRefundPending   Action = "refund_pending"
	ActionRefundFailed    Action = "refund_failed"
	ActionLateRefund      Action = "late_refund"
	ActionRefundExcess    Action = "refund_excess"
)

// Entry is one line of the audit trail. OrderID is empty for an act on no
// order; SubjectID names the row the act made or moved.
type Entry struct {
	ID          int64  `gorm:"primaryKey;autoIncrement"`
	OrderID     string `gorm:"size:36;default:null"`
	Action      Action `gorm:"size:32;not null"`
	Actor       Actor  `gorm:"embedded;embeddedPrefix:actor_"`
	SubjectID   string `gorm:"size:36;default:null"`
	AmountCents *int64
	Reason      string    `gorm:"not null"`
	At          time.Time `gorm:"not null"`
}

func (Entry) TableName() string { return "audit_entries" }

// ErrNoActor refuses an act whose actor is unknown rather than record it without.
var ErrNoActor = errors.New("models: an audited act without an actor")

// Audit records the entry through tx, the act's own transaction: by the
// entry's actor or else the context's (WithActor), at its time or now.
func Audit(tx *gorm.DB, e Entry) error {
	if e.Actor.Kind == "" {
		e.Actor, _ = tx.Statement.Context.Value(actorKey{}).(Actor)
	}
	if e.Actor.Kind == "" {
		return ErrNoActor
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC()
	return tx.Create(&e).Error
}

// History is the order's trail, oldest first.
func (s Trail) History(ctx context.Context, orderID string) ([]Entry, error) {
	var entries []Entry
	err := s.DB.WithContext(ctx).Where("order_id = ?", orderID).Order("id").Find(&entries).Error
	return entries, err
}

// Trail reads the audit entries back: an order's history, a user's traces.
type Trail struct {
	DB *gorm.DB
}

func Cents(n int64) *int64 { return &n }

// Traces are the rows a user's operations left, by the keys they carried
// (DerivedKey, a payment's ProviderKey), and every order's number by id.
type Traces struct {
	Orders   map[string]models.Order
	Payments map[string]models.Payment
	Refunds  map[string]models.Refund
	Numbers  map[string]int64
}

// TracesOf finds the user's orders, payments and refunds written under refs.
func (s Trail) TracesOf(ctx context.Context, userID string, refs []string) (Traces, error) {
	t := Traces{Orders: map[string]models.Order{}, Payments: map[string]models.Payment{}, Refunds: map[string]models.Refund{}, Numbers: map[string]int64{}}
	if len(refs) == 0 {
		return t, nil
	}
	db := s.DB.WithContext(ctx)
	var orders []models.Order
	if err := db.Where("user_id = ? AND derived_key IN ?", userID, refs).Find(&orders).Error; err != nil {
		return t, err
	}
	for _, o := range orders {
		t.Orders[o.DerivedKey] = o
	}
	var numbered []models.Order
	if err := db.Select("id", "number").Where("user_id = ?", userID).Find(&numbered).Error; err != nil {
		return t, err
	}
	for _, o := range numbered {
		t.Numbers[o.ID] = o.Number
	}
	var payments []models.Payment
	err := db.Select("payments.*").Joins("JOIN orders ON orders.id = payments.order_id").
		Where("orders.user_id = ? AND payments.provider_key IN ?", userID, refs).Find(&payments).Error
	if err != nil {
		return t, err
	}
	for _, p := range payments {
		t.Payments[p.ProviderKey] = p
	}
	var refunds []models.Refund
	err = db.Select("refunds.*").Joins("JOIN orders ON orders.id = refunds.order_id").
		Where("orders.user_id = ? AND refunds.derived_key IN ?", userID, refs).Order("refunds.created_at").Find(&refunds).Error
	if err != nil {
		return t, err
	}
	for _, r := range refunds {
		t.Refunds[r.DerivedKey] = r // the last attempt of the operation
	}
	return t, nil
}
