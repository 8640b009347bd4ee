package outbox

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// settle records what came of the events handed: the ones done in the
// inbox, together and first, so that a failure that cannot be written
// does not hand them again; then each one failed on its own schedule. An
// event that was cut off, or whose consumer was unavailable, is neither:
// it is handed again, with no attempt counted. Both writes outlive a
// cancelled ctx: what a consumer did is recorded even as the relay stops.
func (r *Relay) settle(ctx context.Context, consumer string, events []pending, outcomes []error) error {
	ctx = context.WithoutCancel(ctx)
	var done []pending
	for i, err := range outcomes {
		if err == nil {
			done = append(done, events[i])
		}
	}
	if err := r.mark(ctx, consumer, done); err != nil {
		return err
	}
	for i, err := range outcomes {
		if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, errCutOff) {
			continue
		}
		parked, err := r.failed(ctx, consumer, events[i], err)
		if err != nil {
			return err
		}
		if parked {
			r.cfg.Logger.Error("outbox: parked an event its consumer failed at every attempt; staff may retry it", "consumer", consumer, "event", events[i].ID, "attempts", events[i].Attempts+1)
		}
	}
	return nil
}

// mark records the events done in the consumer's inbox, all in one
// statement (a consumer that recorded one with Once already leaves it as
// it was), and forgets the failures of those that had failed before, in
// the same transaction.
func (r *Relay) mark(ctx context.Context, consumer string, done []pending) error {
	if len(done) == 0 {
		return nil
	}
	now := time.Now().UTC()
	rows := make([]inboxRow, len(done))
	var retried []string
	for i, ev := range done {
		rows[i] = inboxRow{Consumer: consumer, EventID: ev.ID, ProcessedAt: now}
		if ev.Attempts > 0 {
			retried = append(retried, ev.ID)
		}
	}
	return r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil || len(retried) == 0 {
			return err
		}
		return tx.Delete(&retryRow{}, "consumer = ? AND event_id IN ?", consumer, retried).Error
	})
}

// sweep forgets the failures of the consumer's events that are in its
// inbox: a consumer that records its effect itself (Once) and is stopped
// before the relay's mark leaves its event's schedule behind. The relay
// sweeps when it takes a consumer's lease.
func (r *Relay) sweep(ctx context.Context, consumer string) error {
	return r.db.WithContext(ctx).Where("consumer = ? AND EXISTS (SELECT 1 FROM inbox i WHERE i.consumer = outbox_retries.consumer AND i.event_id = outbox_retries.event_id)", consumer).
		Delete(&retryRow{}).Error
}
