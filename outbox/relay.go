package outbox

import (
	"cmp"
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
// retry while later ones go on, so a consumer may see them out of order.
// It reads the events batch at a time, hands a Batcher a whole batch at
// once, and records the batch's handled events in the inbox with one
// statement. Every instance runs one; a consumer's lease (migration 9)
// lets one instance at a time hand that consumer its events, so that a
// receipt is not sent by two instances at once. A lease lapses when its
// holder stops renewing it (a kill -9), and another instance takes the
// consumer over: it hands again what the dead one had not recorded in the
// inbox, which each consumer's Once, or JetStream's duplicate window,
// absorbs.
type Relay struct {
	db        *gorm.DB
	consumers []Consumer
	wakes     []chan struct{} // one per consumer: Wake's
	cfg       RelayConfig
}

// RelayConfig is how a relay polls and leases.
type RelayConfig struct {
	// Interval is the time between two polls for new events (OUTBOX_POLL_INTERVAL),
	// when nothing wakes the relay sooner.
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
	r := &Relay{db: db, consumers: consumers, cfg: cfg}
	for range consumers {
		r.wakes = append(r.wakes, make(chan struct{}, 1))
	}
	return r
}

// Wake tells the relay that events may have been committed, so that it
// looks at once instead of at its next poll. It never blocks: wakes that
// come while the relay is busy are one look, after the current pass.
func (r *Relay) Wake() {
	for _, w := range r.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Run relays until ctx ends, each consumer on its own, then gives back
// the leases it holds, so that another instance takes over at once.
func (r *Relay) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, c := range r.consumers {
		wg.Go(func() { r.run(ctx, c, r.wakes[i]) })
	}
	wg.Wait()
}

func (r *Relay) run(ctx context.Context, c Consumer, wake <-chan struct{}) {
	ticker := time.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	defer r.release(c.Name())
	var until time.Time // of this instance's lease of the consumer
	away := false       // the consumer is unavailable: said once, not at every poll
	for {
		err := r.pass(ctx, c, &until)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrUnavailable):
			if !away {
				r.cfg.Logger.Warn("outbox: consumer unavailable; its events wait until it is back", "consumer", c.Name(), "err", err)
			}
			away = true
		case err != nil:
			r.cfg.Logger.Warn("outbox: consumer failed; trying again at the next poll", "consumer", c.Name(), "err", err)
		case away:
			r.cfg.Logger.Info("outbox: consumer back; handing it the events that waited", "consumer", c.Name())
			away = false
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-wake:
		}
	}
}

// pass hands the consumer the events it has not handled whose turn has
// come, in seq order, batch by batch, while this instance holds its
// lease. An event that fails is due again on its own schedule, and the
// next ones go on; an unavailable consumer, or a lease lost, ends the pass.
func (r *Relay) pass(ctx context.Context, c Consumer, until *time.Time) error {
	for {
		held := !until.IsZero()
		var err error
		if *until, err = r.lease(ctx, c.Name(), *until); err != nil || until.IsZero() {
			return err
		}
		if !held {
			if err := r.sweep(ctx, c.Name()); err != nil {
				return err
			}
		}
		events, err := due(ctx, r.db, c, time.Now().UTC())
		if err != nil {
			return err
		}
		outcomes, err := r.hand(ctx, c, events, until)
		if err := r.settle(ctx, c.Name(), events, outcomes); err != nil {
			return err
		}
		if errors.Is(err, errLeaseLost) {
			return nil // the other instance goes on
		}
		if err != nil || len(events) < batch {
			return err
		}
	}
}

// hand hands the events to the consumer, all at once to a Batcher, and
// reports the outcome of each event it handed, in order: nil for done. It
// stops early, with an error, when the consumer is unavailable or the
// lease is lost; the events it did not hand are not in outcomes.
func (r *Relay) hand(ctx context.Context, c Consumer, events []pending, until *time.Time) ([]error, error) {
	if b, ok := c.(Batcher); ok && len(events) > 0 {
		all := make([]Event, len(events))
		for i, ev := range events {
			all[i] = ev.Event
		}
		var outcomes []error
		err := r.leased(ctx, c.Name(), until, func(hctx context.Context) []error {
			outcomes = b.HandleBatch(hctx, r.db, all)
			return outcomes
		})
		return outcomes, err
	}
	outcomes := make([]error, 0, len(events))
	for _, ev := range events {
		err := r.leased(ctx, c.Name(), until, func(hctx context.Context) []error {
			outcomes = append(outcomes, c.Handle(hctx, r.db, ev.Event))
			return outcomes[len(outcomes)-1:]
		})
		if err != nil {
			return outcomes, err
		}
	}
	return outcomes, nil
}

// leased renews the consumer's lease and runs handle with a context cut
// off when the lease ends, so that another instance taking the consumer
// over does not act beside it. It reports the lease lost, before or
// during handle, and an unavailable consumer, as errors.
func (r *Relay) leased(ctx context.Context, consumer string, until *time.Time, handle func(context.Context) []error) error {
	var err error
	if *until, err = r.lease(ctx, consumer, *until); err != nil || until.IsZero() {
		return cmp.Or(err, errLeaseLost)
	}
	hctx, cancel := context.WithDeadline(ctx, *until)
	defer cancel()
	var stop error
	outcomes := handle(hctx)
	for i, err := range outcomes {
		if err != nil && hctx.Err() != nil {
			outcomes[i] = fmt.Errorf("%w: %w", errCutOff, err)
		}
		if stop == nil && (errors.Is(outcomes[i], ErrUnavailable) || errors.Is(outcomes[i], errCutOff)) {
			stop = outcomes[i]
		}
	}
	return stop
}

var (
	// errLeaseLost ends a pass whose lease another instance took
	// meanwhile: that instance goes on.
	errLeaseLost = errors.New("the lease passed to another instance")
	// errCutOff is an event whose handling the lease's end, or the relay's
	// stop, cut off: not the event's fault, so no attempt is counted.
	errCutOff = errors.New("cut off at the lease's end")
)

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
