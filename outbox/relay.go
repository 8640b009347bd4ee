package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// batch bounds the events one read takes for a consumer; the next read takes the rest.
const batch = 100

// Relay hands every event to each consumer, in seq order, until Handle returns
// nil; a failed event waits for its retry while later ones go on. A consumer's
// lease lets one instance at a time hand it its events; a lapsed one (kill -9)
// lets another hand again what was not in the inbox yet, which Once absorbs.
type Relay struct {
	db        *gorm.DB
	consumers []Consumer
	wakes     []chan struct{} // one per consumer: Wake's
	cfg       RelayConfig
	// seqCommitOrder: events commit in seq order (SQLite: one writer at a time),
	// so that once an event is read, no event before it can appear later. Each
	// consumer's look then starts past the events it has settled, not at the
	// first event (a look read every event: half the CPU of a busy SQLite
	// shop). PostgreSQL may commit seqs out of order, and looks from the start.
	seqCommitOrder bool
}

type RelayConfig struct {
	Interval time.Duration // between two polls, when nothing wakes the relay (OUTBOX_POLL_INTERVAL)
	Lease    time.Duration // a consumer's lease without renewal: the longest a dead instance's consumers wait (OUTBOX_LEASE)
	Holder   string        // this instance in the leases: unique per process
	// MaxAttempts at an event before it is parked (OUTBOX_MAX_ATTEMPTS); the
	// wait between them doubles from Backoff to MaxBackoff (1 s and 30 min when zero).
	MaxAttempts         int
	Backoff, MaxBackoff time.Duration
	// Recheck is the time between two looks from the first event, where a look
	// starts past the ones settled (seqCommitOrder): they find an event taken
	// out of its consumer's retries with no look to see it, as the release
	// before this one's Retry did (a minute when zero).
	Recheck time.Duration
	Logger  *slog.Logger
}

func NewRelay(db *gorm.DB, consumers []Consumer, cfg RelayConfig) *Relay {
	if cfg.Backoff == 0 {
		cfg.Backoff, cfg.MaxBackoff = time.Second, 30*time.Minute
	}
	cfg.Recheck = cmp.Or(cfg.Recheck, time.Minute)
	r := &Relay{db: db, consumers: consumers, cfg: cfg, seqCommitOrder: db.Dialector.Name() == "sqlite"}
	for range consumers {
		r.wakes = append(r.wakes, make(chan struct{}, 1))
	}
	return r
}

// Wake makes the relay look at once for events just committed, not at its
// next poll. It never blocks: wakes while the relay is busy are one look after.
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
	var mark int64      // every event up to it is in c's inbox or retries, or not c's (seqCommitOrder)
	away := false       // the consumer is unavailable: said once, not at every poll
	rechecked := time.Now()
	for {
		began := time.Now()
		if began.Sub(rechecked) >= r.cfg.Recheck {
			mark, rechecked = 0, began
		}
		err := r.pass(ctx, c, &until, &mark)
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
			// A wake follows every commit: under load, one look a wakeGap
			// hands on what many commits wrote, instead of one look each
			// (each reads the consumer's unhandled events, and on SQLite
			// takes CPU from the one writer).
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(began.Add(wakeGap))):
			}
		}
	}
}

// wakeGap is the least time from a pass to the next one a wake starts.
const wakeGap = 50 * time.Millisecond

// pass hands the consumer, batch by batch, the events whose turn has come,
// while this instance holds its lease, until none is left. A batch is settled
// while the next is read (leaving it out) and handed; the settles are in order.
// A pass that hands all and settles all moves mark to the last event there was as it began.
func (r *Relay) pass(ctx context.Context, c Consumer, until *time.Time, mark *int64) (err error) {
	settling := []int64{0} // the seqs of the batch being settled, and 0 (no event's): NOT IN needs one
	settled := make(chan error, 1)
	settled <- nil
	last, caughtUp := int64(0), false
	defer func() {
		if err = cmp.Or(<-settled, err); err == nil && caughtUp {
			*mark = max(*mark, last)
		}
	}()
	if r.seqCommitOrder {
		if err = r.db.WithContext(ctx).Table("events").Select("COALESCE(MAX(seq), 0)").Scan(&last).Error; err != nil {
			return err
		}
	}
	for {
		if *until, err = r.lease(ctx, c.Name(), *until); err != nil || until.IsZero() {
			return err
		}
		events, err := due(ctx, r.db, c, time.Now().UTC(), settling, *mark)
		if err != nil || len(events) == 0 {
			caughtUp = err == nil
			return err
		}
		outcomes, err := r.hand(ctx, c, events, until)
		err = cmp.Or(<-settled, err)
		settling = settling[:1]
		for _, ev := range events {
			settling = append(settling, ev.Seq)
		}
		go func() { settled <- r.settle(ctx, c.Name(), events, outcomes) }()
		if errors.Is(err, errLeaseLost) {
			return nil // the other instance goes on
		}
		if err != nil {
			return err
		}
	}
}

// hand hands the events to a Batcher all at once, to any other consumer one
// by one, and reports each one's outcome (nil: done). Each call renews the
// lease first and is cut off at its end, so that an instance taking the
// consumer over does not act beside it.
func (r *Relay) hand(ctx context.Context, c Consumer, events []pending, until *time.Time) (outcomes []error, err error) {
	all := make([]Event, len(events))
	for i, ev := range events {
		all[i] = ev.Event
	}
	handle, size := func(ctx context.Context, evs []Event) []error { return []error{c.Handle(ctx, r.db, evs[0])} }, 1
	if b, ok := c.(Batcher); ok {
		handle, size = func(ctx context.Context, evs []Event) []error { return b.HandleBatch(ctx, r.db, evs) }, batch
	}
	for chunk := range slices.Chunk(all, size) {
		if *until, err = r.lease(ctx, c.Name(), *until); err != nil || until.IsZero() {
			return outcomes, cmp.Or(err, errLeaseLost)
		}
		hctx, cancel := context.WithDeadline(ctx, *until)
		done := handle(hctx, chunk)
		if len(done) != len(chunk) { // trust none of a batch's answers if one is missing
			err := fmt.Errorf("outbox: %s answered %d of %d events", c.Name(), len(done), len(chunk))
			done = slices.Repeat([]error{err}, len(chunk))
		}
		for i, err := range done {
			if err != nil && hctx.Err() != nil {
				done[i] = fmt.Errorf("%w: %w", errCutOff, err)
			}
		}
		cancel()
		outcomes = append(outcomes, done...)
		for _, err := range done {
			if errors.Is(err, ErrUnavailable) || errors.Is(err, errCutOff) {
				return outcomes, err
			}
		}
	}
	return outcomes, nil
}

// Lease is a row's "held by whom, until when", in two of its columns: a
// consumer's lease, a webhook delivery's claim. A holder may take it when
// nobody holds it, it holds it already, or its time is up: one write on that
// condition, so that two holders never both take it.
type Lease struct {
	Holder, Until string // the columns
}

// Free is the condition, in SQL, under which holder may take the lease at now.
func (l Lease) Free(holder string, now time.Time) clause.Expr {
	return gorm.Expr("("+l.Holder+" IS NULL OR "+l.Holder+" = ? OR "+l.Until+" <= ?)", holder, now)
}

// leaseRow is which instance hands a consumer its events, until when.
type leaseRow struct {
	Consumer  string `gorm:"primaryKey"`
	Holder    string
	HeldUntil time.Time
}

func (leaseRow) TableName() string { return "outbox_leases" }

var consumerLease = Lease{Holder: "outbox_leases.holder", Until: "outbox_leases.held_until"}

// lease takes the consumer's lease if free (and sweeps, when this instance
// held none), or renews this instance's once half spent, and reports until
// when it holds it (zero: another does). It reads before it writes: on
// SQLite, every write waits for the one writer.
func (r *Relay) lease(ctx context.Context, consumer string, held time.Time) (time.Time, error) {
	now := time.Now().UTC()
	if held.Sub(now) > r.cfg.Lease/2 {
		return held, nil
	}
	db := r.db.WithContext(ctx)
	var current leaseRow
	if err := db.Where("consumer = ?", consumer).Limit(1).Find(&current).Error; err != nil {
		return time.Time{}, err
	}
	if current.Holder != r.cfg.Holder && current.HeldUntil.After(now) {
		return time.Time{}, nil
	}
	row := leaseRow{Consumer: consumer, Holder: r.cfg.Holder, HeldUntil: now.Add(r.cfg.Lease)}
	res := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "consumer"}},
		DoUpdates: clause.AssignmentColumns([]string{"holder", "held_until"}),
		Where:     clause.Where{Exprs: []clause.Expression{consumerLease.Free(r.cfg.Holder, now)}}}).Create(&row)
	if res.Error != nil || res.RowsAffected == 0 {
		return time.Time{}, res.Error
	}
	if held.IsZero() {
		return row.HeldUntil, r.sweep(ctx, consumer)
	}
	return row.HeldUntil, nil
}

// release gives the consumer's lease back, if this instance holds it.
func (r *Relay) release(consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.db.WithContext(ctx).Where("consumer = ? AND holder = ?", consumer, r.cfg.Holder).Delete(&leaseRow{}).Error; err != nil {
		r.cfg.Logger.Warn("outbox: give back the consumer's lease; it lapses by itself", "consumer", consumer, "err", err)
	}
}

var (
	// ErrUnavailable: the consumer can take nothing now (its broker is away);
	// the relay hands the same events again once it is back, counting no attempt.
	ErrUnavailable = errors.New("the consumer is unavailable")
	// errLeaseLost ends a pass whose lease another instance took: that one goes on.
	errLeaseLost = errors.New("the lease passed to another instance")
	// errCutOff: the lease's end, or the relay's stop, cut the handling off; no attempt counts.
	errCutOff = errors.New("cut off at the lease's end")
)

// Backoff is the wait after the n-th failure in a row (n ≥ 1): first, doubling up
// to ceiling, its upper half random so that those who failed together part.
func Backoff(n int, first, ceiling time.Duration) time.Duration {
	d := ceiling
	if n >= 1 && n < 40 && first<<(n-1) > 0 && first<<(n-1) < ceiling {
		d = first << (n - 1)
	}
	return d/2 + rand.N(d/2+1)
}
