package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// retryRow is an event a consumer failed, with its own schedule (migration 13):
// handed again at next_attempt_at, or parked after MaxAttempts until staff retry it.
type retryRow struct {
	Consumer      string `gorm:"primaryKey"`
	EventID       string `gorm:"primaryKey"`
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	ParkedAt      *time.Time
}

func (retryRow) TableName() string { return "outbox_retries" }

// pending is an event not yet handled by a consumer, with the attempts it failed so far,
// and whether it has a row of outbox_retries (failed, or retried by staff).
type pending struct {
	Event
	Attempts int
	Retried  bool
}

// unhandled selects the events of c's types not in c's inbox, joined to their retries (r).
func unhandled(db *gorm.DB, c Consumer) *gorm.DB {
	q := db.Table("events").Where("NOT EXISTS (SELECT 1 FROM inbox i WHERE i.consumer = ? AND i.event_id = events.id)", c.Name())
	if only, ok := c.(Selective); ok {
		q = q.Where("events.type IN ?", only.Types())
	}
	return q.Joins("LEFT JOIN outbox_retries r ON r.consumer = ? AND r.event_id = events.id", c.Name())
}

// due reads, in seq order, up to batch unhandled events whose turn has
// come: never failed, or due again and not parked; none of settling's seqs.
// Past mark (0: none), only later events and the consumer's retries are read.
func due(ctx context.Context, db *gorm.DB, c Consumer, now time.Time, settling []int64, mark int64) ([]pending, error) {
	var events []pending
	q := unhandled(db.WithContext(ctx), c).Where("r.event_id IS NULL OR (r.parked_at IS NULL AND r.next_attempt_at <= ?)", now)
	if mark > 0 {
		q = q.Where(`events.seq IN (SELECT seq FROM events WHERE seq > ? UNION ALL
  SELECT e.seq FROM outbox_retries x JOIN events e ON e.id = x.event_id WHERE x.consumer = ?)`, mark, c.Name())
	}
	err := q.Where("events.seq NOT IN ?", settling).Select("events.*, COALESCE(r.attempts, 0) AS attempts, r.event_id IS NOT NULL AS retried").Order("events.seq").Limit(batch).Scan(&events).Error
	return events, err
}

// settle records what came of the events handed, one statement a write: the
// done ones in the inbox first, so that a failure that cannot be written does
// not hand them again (their old failures, forgotten next, count for nothing
// once they are in it); the failed ones due after a backoff, or parked once out
// of attempts (one cut off or unavailable counts no attempt). The writes outlive ctx's end.
func (r *Relay) settle(ctx context.Context, consumer string, events []pending, outcomes []error) error {
	db := r.db.WithContext(context.WithoutCancel(ctx)).Session(&gorm.Session{SkipDefaultTransaction: true})
	now := time.Now().UTC()
	var done []inboxRow
	var retried []string
	var failed []retryRow
	for i, err := range outcomes {
		ev := events[i]
		switch {
		case err == nil:
			done = append(done, inboxRow{Consumer: consumer, EventID: ev.ID, ProcessedAt: now})
			if ev.Retried {
				retried = append(retried, ev.ID)
			}
		case !errors.Is(err, ErrUnavailable) && !errors.Is(err, errCutOff):
			row := retryRow{Consumer: consumer, EventID: ev.ID, Attempts: ev.Attempts + 1, LastError: err.Error(),
				NextAttemptAt: now.Add(Backoff(ev.Attempts+1, r.cfg.Backoff, r.cfg.MaxBackoff))}
			if row.Attempts >= r.cfg.MaxAttempts {
				row.ParkedAt = &now
			}
			failed = append(failed, row)
		}
	}
	if len(done) > 0 {
		if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&done).Error; err != nil {
			return err
		}
	}
	if len(retried) > 0 {
		if err := db.Delete(&retryRow{}, "consumer = ? AND event_id IN ?", consumer, retried).Error; err != nil {
			return err
		}
	}
	if len(failed) == 0 {
		return nil
	}
	if err := db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&failed).Error; err != nil {
		return err
	}
	for _, row := range failed {
		if row.ParkedAt != nil {
			r.cfg.Logger.Error("outbox: parked an event its consumer failed at every attempt; staff may retry it",
				"consumer", consumer, "event", row.EventID, "attempts", row.Attempts)
		}
	}
	return nil
}

// sweep forgets the failures of the consumer's events in its inbox, which a
// consumer that records its own effect (Once) leaves if stopped before settle.
func (r *Relay) sweep(ctx context.Context, consumer string) error {
	return r.db.WithContext(ctx).Where("consumer = ? AND EXISTS (SELECT 1 FROM inbox i "+
		"WHERE i.consumer = outbox_retries.consumer AND i.event_id = outbox_retries.event_id)", consumer).Delete(&retryRow{}).Error
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

// Retry unparks a parked event by forgetting its failures: the relay hands
// it again at its next poll, as a new event. Its row stays, due now, for a
// relay whose look starts past it (Relay.seqCommitOrder), and goes once the
// event is handled. It reports whether it was parked.
func Retry(ctx context.Context, tx *gorm.DB, consumer, eventID string) (bool, error) {
	res := tx.WithContext(ctx).Model(&retryRow{}).Where("consumer = ? AND event_id = ? AND parked_at IS NOT NULL", consumer, eventID).
		Updates(map[string]any{"attempts": 0, "parked_at": nil, "next_attempt_at": time.Now().UTC()})
	return res.RowsAffected == 1, res.Error
}

// lag reads each consumer's backlog from the database at each scrape: every instance reports one truth.
type lag struct {
	relay                   *Relay
	pending, oldest, parked *prometheus.Desc
}

// Collectors are the relay's series, per consumer: the events not handled
// yet, the age of the oldest, and the events parked.
func (r *Relay) Collectors() []prometheus.Collector {
	label := []string{"consumer"}
	return []prometheus.Collector{&lag{relay: r,
		pending: prometheus.NewDesc("shop_outbox_pending", "Events a consumer has not handled yet, parked ones aside.", label, nil),
		oldest:  prometheus.NewDesc("shop_outbox_oldest_age_seconds", "Age of the oldest event a consumer has not handled yet, parked ones aside; 0 when none.", label, nil),
		parked:  prometheus.NewDesc("shop_outbox_parked", "Events a consumer failed at every attempt, waiting for staff.", label, nil),
	}}
}

func (l *lag) Describe(ch chan<- *prometheus.Desc) { ch <- l.pending; ch <- l.oldest; ch <- l.parked }

func (l *lag) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range l.relay.consumers {
		db := l.relay.db.WithContext(ctx)
		var waiting, parked int64
		var first Event
		err := errors.Join(unhandled(db, c).Where("r.parked_at IS NULL").Count(&waiting).Error,
			unhandled(db, c).Where("r.parked_at IS NULL").Select("events.created_at").Order("events.seq").Limit(1).Scan(&first).Error,
			unhandled(db, c).Where("r.parked_at IS NOT NULL").Count(&parked).Error)
		if err != nil { // this consumer's series only: the rest of the page still serves
			ch <- prometheus.NewInvalidMetric(l.pending, err)
			continue
		}
		age := 0.0
		if waiting > 0 {
			age = time.Since(first.CreatedAt).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(l.pending, prometheus.GaugeValue, float64(waiting), c.Name())
		ch <- prometheus.MustNewConstMetric(l.oldest, prometheus.GaugeValue, age, c.Name())
		ch <- prometheus.MustNewConstMetric(l.parked, prometheus.GaugeValue, float64(parked), c.Name())
	}
}
