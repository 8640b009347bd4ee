package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// batch bounds the events one poll reads for a consumer; the next read
// takes the rest.
const batch = 100

// Relay hands every event to each consumer, in seq order, until the
// consumer's Handle returns nil; an event that fails waits for its own
// retry while later ones go on, so a consumer may see them out of order. Every instance runs one; a consumer's
// lease (migration 9) lets one instance at a time hand that consumer its
// events, so that a receipt is not sent by two instances at once. A lease
// lapses when its holder stops renewing it (a kill -9), and another
// instance takes the consumer over: it hands again what the dead one had
// not recorded in the inbox, which each consumer's Once, or JetStream's
// duplicate window, absorbs.
type Relay struct {
	db        *gorm.DB
	consumers []Consumer
	cfg       RelayConfig
}

// RelayConfig is how a relay polls and leases.
type RelayConfig struct {
	// Interval is the time between two polls for new events (OUTBOX_POLL_INTERVAL).
	Interval time.Duration
	// Lease is how long a consumer stays this instance's without a renewal
	// (OUTBOX_LEASE): the longest a dead instance's consumers wait.
	Lease time.Duration
	// Holder names this instance in the leases: unique per process.
	Holder string
	// MaxAttempts a consumer makes at an event before the event is parked
	// (OUTBOX_MAX_ATTEMPTS); Backoff doubles from the first failure's wait
	// to MaxBackoff (1 s and 30 min when zero).
	MaxAttempts         int
	Backoff, MaxBackoff time.Duration
	Logger              *slog.Logger
}

// NewRelay is a relay of db's events to the consumers.
func NewRelay(db *gorm.DB, consumers []Consumer, cfg RelayConfig) *Relay {
	if cfg.Backoff == 0 {
		cfg.Backoff, cfg.MaxBackoff = time.Second, 30*time.Minute
	}
	return &Relay{db: db, consumers: consumers, cfg: cfg}
}

// Run relays until ctx ends, each consumer on its own, then gives back
// the leases it holds, so that another instance takes over at once.
func (r *Relay) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range r.consumers {
		wg.Go(func() { r.run(ctx, c) })
	}
	wg.Wait()
}

func (r *Relay) run(ctx context.Context, c Consumer) {
	ticker := time.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	defer r.release(c.Name())
	var until time.Time // of this instance's lease of the consumer
	for {
		if err := r.pass(ctx, c, &until); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox: consumer failed; trying again at the next poll", "consumer", c.Name(), "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// pass hands the consumer the events it has not handled whose turn has
// come, in seq order, while this instance holds its lease. An event that
// fails is due again on its own schedule, and the next ones go on; an
// unavailable consumer, or a lease lost, ends the pass.
func (r *Relay) pass(ctx context.Context, c Consumer, until *time.Time) error {
	for {
		var err error
		if *until, err = r.lease(ctx, c.Name(), *until); err != nil || until.IsZero() {
			return err
		}
		events, err := due(ctx, r.db, c, time.Now().UTC())
		if err != nil {
			return err
		}
		for _, ev := range events {
			if *until, err = r.lease(ctx, c.Name(), *until); err != nil || until.IsZero() {
				return err // lost meanwhile: the other instance goes on
			}
			// The handler is cut off when the lease ends, so that another
			// instance taking the consumer over does not act beside it.
			hctx, cancel := context.WithDeadline(ctx, *until)
			err = r.handle(hctx, c, ev)
			lost := hctx.Err()
			cancel()
			if err == nil || lost != nil || errors.Is(err, ErrUnavailable) {
				if err != nil {
					return fmt.Errorf("event %s: %w", ev.ID, err)
				}
				continue
			}
			parked, err := r.failed(ctx, c.Name(), ev, err)
			if err != nil {
				return err
			}
			if parked {
				r.cfg.Logger.Error("outbox: parked an event its consumer failed at every attempt; staff may retry it", "consumer", c.Name(), "event", ev.ID, "attempts", ev.Attempts+1)
			}
		}
		if len(events) < batch {
			return nil
		}
	}
}

// handle hands one event to the consumer and, once it is done, makes sure
// the event is in its inbox: a consumer that has nothing to do for an
// event (a receipt for a placed order) returns nil without an effect.
func (r *Relay) handle(ctx context.Context, c Consumer, ev pending) error {
	if err := c.Handle(ctx, r.db, ev.Event); err != nil {
		return err
	}
	if ev.Attempts > 0 { // it had failed before: its schedule goes
		if err := r.db.WithContext(ctx).Delete(&retryRow{}, "consumer = ? AND event_id = ?", c.Name(), ev.ID).Error; err != nil {
			return err
		}
	}
	done, err := Processed(ctx, r.db, c.Name(), ev.ID)
	if err != nil || done {
		return err
	}
	_, err = Once(ctx, r.db, c.Name(), ev.ID, func(*gorm.DB) error { return nil })
	return err
}

// lease is a consumer's lease for this instance, held until held: taken
// if free or lapsed, renewed once half spent. It reports until when this
// instance holds it; zero when another instance does. Only taking and
// renewing write: on SQLite, every write waits for the one writer.
func (r *Relay) lease(ctx context.Context, consumer string, held time.Time) (time.Time, error) {
	now := time.Now().UTC()
	if held.Sub(now) > r.cfg.Lease/2 {
		return held, nil
	}
	db := r.db.WithContext(ctx)
	var current leaseRow
	err := db.Where("consumer = ?", consumer).Take(&current).Error
	switch {
	case err == nil && current.Holder != r.cfg.Holder && current.HeldUntil.After(now):
		return time.Time{}, nil
	case err != nil && !errors.Is(err, gorm.ErrRecordNotFound):
		return time.Time{}, err
	}
	until := now.Add(r.cfg.Lease)
	taken, err := consumerLease.Take(db.Model(&leaseRow{}).Where("consumer = ?", consumer), r.cfg.Holder, now, until)
	if err != nil || taken == 1 {
		return until, err
	}
	res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&leaseRow{Consumer: consumer, Holder: r.cfg.Holder, HeldUntil: until})
	if res.Error != nil || res.RowsAffected == 0 {
		return time.Time{}, res.Error
	}
	return until, nil
}

// release gives the consumer's lease back, if this instance holds it.
func (r *Relay) release(consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.db.WithContext(ctx).Where("consumer = ? AND holder = ?", consumer, r.cfg.Holder).Delete(&leaseRow{}).Error
	if err != nil {
		r.cfg.Logger.Warn("outbox: give back the consumer's lease; it lapses by itself", "consumer", consumer, "err", err)
	}
}

// leaseRow is which instance hands a consumer its events, until when.
type leaseRow struct {
	Consumer  string `gorm:"primaryKey"`
	Holder    string
	HeldUntil time.Time
}

func (leaseRow) TableName() string { return "outbox_leases" }

// consumerLease is a consumer's lease, in its leaseRow.
var consumerLease = Lease{Holder: "holder", Until: "held_until"}
