// Package outbox carries the shop's business facts out of its database.
// Each fact writes one Event in the transaction that records the fact, so
// the event exists exactly when the fact does. Consumers (the NATS relay,
// the receipt email, the merchant's webhooks) are handed every event at
// least once; each records what it has acted on in its inbox with Once, in
// the transaction of its own effect, so a redelivered event acts once. A
// consumer's work is held by one instance at a time with a Lease.
package outbox

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Event is one business fact, as it leaves the shop.
type Event struct {
	Seq       int64     `gorm:"primaryKey;autoIncrement"`
	ID        string    // unique, derived from the fact's own row, e.g. "order.paid:<payment id>"
	Type      string    // order.placed, order.paid, order.payment_declined, order.refunded, order.refund_failed, order.cancelled
	OrderID   string    //
	Body      string    // CloudEvents 1.0 structured JSON; its data is the order as the API shows it
	CreatedAt time.Time //
}

// TableName is the outbox's table (migration 6).
func (Event) TableName() string { return "events" }

// Consumer acts on events. Handle is called at least once for every event,
// until it returns nil; it uses Once to act at most once.
type Consumer interface {
	Name() string
	Handle(ctx context.Context, db *gorm.DB, ev Event) error
}

// Selective is a Consumer that acts on some types of event only: the
// relay hands it those alone, and so writes no inbox row for the others
// (on SQLite, one commit less per event it would have ignored).
type Selective interface {
	Consumer
	Types() []string
}

// Batcher is a Consumer that takes many events at once: the relay hands
// it each batch it reads in one call instead of one Handle per event.
// HandleBatch answers, for each event in turn, what Handle would have
// (nil: done; the relay then records the events in the inbox together).
type Batcher interface {
	Consumer
	HandleBatch(ctx context.Context, db *gorm.DB, events []Event) []error
}

// inboxRow is one (consumer, event) pair a consumer has acted on.
type inboxRow struct {
	Consumer    string `gorm:"primaryKey"`
	EventID     string `gorm:"primaryKey"`
	ProcessedAt time.Time
}

func (inboxRow) TableName() string { return "inbox" }

// Once runs effect and records that consumer has processed eventID, in one
// transaction. If the pair is recorded already, it runs nothing and
// reports false: the event was acted on before.
func Once(ctx context.Context, db *gorm.DB, consumer, eventID string, effect func(tx *gorm.DB) error) (bool, error) {
	acted := false
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := inboxRow{Consumer: consumer, EventID: eventID, ProcessedAt: time.Now().UTC()}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		acted = true
		return effect(tx)
	})
	return acted && err == nil, err
}

// Processed reports whether consumer has acted on eventID.
func Processed(ctx context.Context, db *gorm.DB, consumer, eventID string) (bool, error) {
	var n int64
	err := db.WithContext(ctx).Model(&inboxRow{}).Where("consumer = ? AND event_id = ?", consumer, eventID).Count(&n).Error
	return n > 0, err
}
