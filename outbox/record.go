package outbox

import (
	"encoding/json"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The events' types: one per business fact.
const (
	OrderPlaced          = "order.placed"
	OrderPaid            = "order.paid"
	OrderPaymentDeclined = "order.payment_declined"
	OrderRefunded        = "order.refunded"
	OrderRefundFailed    = "order.refund_failed"
	OrderCancelled       = "order.cancelled"
)

// Source is the CloudEvents source of every event: the shop.
const Source = "/shop"

// cloudEvent is an event's body: CloudEvents 1.0, structured JSON mode.
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

// EventID is the id of the event of type typ of the fact whose row is
// factID: "<type>:<factID>".
func EventID(typ, factID string) string { return typ + ":" + factID }

// SplitEventID is EventID's inverse; ok is false for anything else.
func SplitEventID(id string) (typ, factID string, ok bool) { return strings.Cut(id, ":") }

// Record writes the event of one fact through tx, the transaction that
// records the fact. Its id is "<type>:<factID>", factID the id of the
// fact's own row, so a re-run of the fact writes no second event (the
// unique index on events.id; a re-run's insert does nothing). data is the
// order as the API shows it.
func Record(tx *gorm.DB, typ, factID, orderID string, data any) error {
	now := time.Now().UTC()
	ev := Event{ID: EventID(typ, factID), Type: typ, OrderID: orderID, CreatedAt: now}
	body, err := json.Marshal(cloudEvent{SpecVersion: "1.0", ID: ev.ID, Source: Source, Type: typ, Subject: orderID,
		Time: now, DataContentType: "application/json", Data: data})
	if err != nil {
		return err
	}
	ev.Body = string(body)
	return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(&ev).Error
}
