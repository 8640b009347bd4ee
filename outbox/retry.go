package outbox

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// retryRow is an event a consumer failed, with its own schedule (migration
// 13): the relay hands it again at next_attempt_at, and the events after it
// meanwhile; after MaxAttempts it is parked, until staff retry it.
type retryRow struct {
	Consumer      string `gorm:"primaryKey"`
	EventID       string `gorm:"primaryKey"`
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	ParkedAt      *time.Time
}

func (retryRow) TableName() string { return "outbox_retries" }

// pending is an event not yet handled by a consumer, with the attempts
// it failed so far.
type pending struct {
	Event
	Attempts int
}

// unhandled selects the events consumer c has not handled yet: not in its
// inbox, of its types.
func unhandled(db *gorm.DB, c Consumer) *gorm.DB {
	q := db.Table("events").Where("NOT EXISTS (SELECT 1 FROM inbox i WHERE i.consumer = ? AND i.event_id = events.id)", c.Name())
	if only, ok := c.(Selective); ok {
		q = q.Where("events.type IN ?", only.Types())
	}
	return q.Joins("LEFT JOIN outbox_retries r ON r.consumer = ? AND r.event_id = events.id", c.Name())
}

// due reads, in seq order, up to batch events c has not handled whose
// turn has come: never failed, or failed and due again, and not parked.
func due(ctx context.Context, db *gorm.DB, c Consumer, now time.Time) ([]pending, error) {
	var events []pending
	err := unhandled(db.WithContext(ctx), c).Where("r.event_id IS NULL OR (r.parked_at IS NULL AND r.next_attempt_at <= ?)", now).
		Select("events.*, COALESCE(r.attempts, 0) AS attempts").Order("events.seq").Limit(batch).Scan(&events).Error
	return events, err
}

// failed records the n-th failure of an event for a consumer: due again
// after a backoff, or parked once the attempts run out. It reports whether
// it parked the event.
func (r *Relay) failed(ctx context.Context, consumer string, ev pending, cause error) (bool, error) {
	now := time.Now().UTC()
	row := retryRow{Consumer: consumer, EventID: ev.ID, Attempts: ev.Attempts + 1, LastError: cause.Error()}
	row.NextAttemptAt = now.Add(Backoff(row.Attempts, r.cfg.Backoff, r.cfg.MaxBackoff))
	if row.Attempts >= r.cfg.MaxAttempts {
		row.ParkedAt = &now
	}
	err := r.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
	return row.ParkedAt != nil, err
}

// Parked is an event a consumer gave up on, for staff.
type Parked struct {
	Consumer, EventID, EventType, OrderID, LastError string
	Attempts                                         int
	ParkedAt                                         time.Time
}

// ParkedEvents lists up to limit parked events, the most recently parked first.
func ParkedEvents(ctx context.Context, db *gorm.DB, limit int) ([]Parked, error) {
	var out []Parked
	err := db.WithContext(ctx).Table("outbox_retries r").Joins("JOIN events e ON e.id = r.event_id").
		Where("r.parked_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.consumer = r.consumer AND i.event_id = r.event_id)").
		Select("r.consumer, r.event_id, e.type AS event_type, e.order_id, r.last_error, r.attempts, r.parked_at").
		Order("r.parked_at DESC").Limit(limit).Scan(&out).Error
	return out, err
}

// Retry unparks a parked event by forgetting its failures: the consumer's
// relay hands it again at its next poll, as a new event. It reports whether the
// event was parked.
func Retry(ctx context.Context, tx *gorm.DB, consumer, eventID string) (bool, error) {
	res := tx.WithContext(ctx).Where("consumer = ? AND event_id = ? AND parked_at IS NOT NULL", consumer, eventID).Delete(&retryRow{})
	return res.RowsAffected == 1, res.Error
}
