// Package outbox carries the shop's business facts out of its database.
// Each fact writes one Event in its own transaction, so the event exists
// exactly when the fact does. The Relay hands every event to each Consumer
// (NATS, receipts, webhooks) at least once; a consumer records what it acted
// on in its inbox with Once, in its effect's transaction, so it acts once.
package outbox

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Event is one business fact, as it leaves the shop (table events, migration 6).
type Event struct {
	Seq       int64  `gorm:"primaryKey;autoIncrement"`
	ID        string // "<type>:<id of the fact's row>": EventID
	Type      string // one of the constants below
	OrderID   string
	Body      string // CloudEvents 1.0 structured JSON; its data is the order as the API shows it
	CreatedAt time.Time
}

func (Event) TableName() string { return "events" }

// The events' types: one per business fact.
const (
	OrderPlaced          = "order.placed"
	OrderPaid            = "order.paid"
	OrderPaymentDeclined = "order.payment_declined"
	OrderRefunded        = "order.refunded"
	OrderRefundFailed    = "order.refund_failed"
	OrderCancelled       = "order.cancelled"
)

type cloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            any       `json:"data"`
}

// EventID is the id of the event of type typ of the fact whose row is factID.
func EventID(typ, factID string) string { return typ + ":" + factID }

// SplitEventID is EventID's inverse; ok is false for anything else.
func SplitEventID(id string) (typ, factID string, ok bool) { return strings.Cut(id, ":") }

// Record writes the event of one fact through tx, the fact's transaction; its
// id comes from the fact's row, so a re-run writes no second event (unique id).
func Record(tx *gorm.DB, typ, factID, orderID string, data any) error {
	now := time.Now().UTC()
	ev := Event{ID: EventID(typ, factID), Type: typ, OrderID: orderID, CreatedAt: now}
	body, err := json.Marshal(cloudEvent{SpecVersion: "1.0", ID: ev.ID, Source: "/shop", Type: typ, Subject: orderID,
		Time: now, DataContentType: "application/json", Data: data})
	if err != nil {
		return err
	}
	ev.Body = string(body)
	return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(&ev).Error
}

// Consumer acts on events. Handle is called at least once for every event,
// until it returns nil; it uses Once to act at most once.
type Consumer interface {
	Name() string
	Handle(ctx context.Context, db *gorm.DB, ev Event) error
}

// Selective is a Consumer handed only the events of its Types: it gets no
// inbox row for the others (on SQLite, one commit less each).
type Selective interface {
	Consumer
	Types() []string
}

// Batcher is a Consumer handed each batch the relay reads in one call.
// HandleBatch answers, for each event in turn, what Handle would have.
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
// transaction; if the pair is recorded already, it runs nothing.
func Once(ctx context.Context, db *gorm.DB, consumer, eventID string, effect func(tx *gorm.DB) error) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := inboxRow{Consumer: consumer, EventID: eventID, ProcessedAt: time.Now().UTC()}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return effect(tx)
	})
}

func Processed(ctx context.Context, db *gorm.DB, consumer, eventID string) (bool, error) {
	var n int64
	err := db.WithContext(ctx).Model(&inboxRow{}).Where("consumer = ? AND event_id = ?", consumer, eventID).Count(&n).Error
	return n > 0, err
}
