package outbox

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Lease is a row's "held by whom, until when", in two of its columns: a
// consumer's lease (the relay's), a webhook delivery's claim by one sender.
// The rule, once: a holder may take the lease when nobody holds it, when it
// holds it already, or when its time is up; taking it is one conditional
// write, so that two holders never both take it.
type Lease struct {
	Holder, Until string // the columns
}

// Free is the condition, in SQL, under which holder may take the lease at now.
func (l Lease) Free(holder string, now time.Time) clause.Expr {
	return gorm.Expr("("+l.Holder+" IS NULL OR "+l.Holder+" = ? OR "+l.Until+" <= ?)", holder, now)
}

// Take gives holder, until until, the leases of the rows q selects that are
// free at now, and reports how many.
func (l Lease) Take(q *gorm.DB, holder string, now, until time.Time) (int64, error) {
	res := q.Where(l.Free(holder, now)).Updates(map[string]any{l.Holder: holder, l.Until: until})
	return res.RowsAffected, res.Error
}

// leaseRow is which instance hands a consumer its events, until when.
type leaseRow struct {
	Consumer  string `gorm:"primaryKey"`
	Holder    string
	HeldUntil time.Time
}

func (leaseRow) TableName() string { return "outbox_leases" }

// consumerLease is a leaseRow's Lease, named as an upsert's condition may name it.
var consumerLease = Lease{Holder: "outbox_leases.holder", Until: "outbox_leases.held_until"}

// lease is the consumer's lease for this instance, held until held: taken
// if free, renewed once half spent. It reports until when this instance
// holds it; zero when another does. It reads before it writes: on SQLite,
// every write waits for the one writer.
func (r *Relay) lease(ctx context.Context, consumer string, held time.Time) (time.Time, error) {
	now := time.Now().UTC()
	if held.Sub(now) > r.cfg.Lease/2 {
		return held, nil
	}
	db := r.db.WithContext(ctx)
	var current leaseRow
	err := db.Where("consumer = ?", consumer).Take(&current).Error
	if err == nil && current.Holder != r.cfg.Holder && current.HeldUntil.After(now) {
		return time.Time{}, nil
	}
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return time.Time{}, err
	}
	row := leaseRow{Consumer: consumer, Holder: r.cfg.Holder, HeldUntil: now.Add(r.cfg.Lease)}
	res := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "consumer"}},
		DoUpdates: clause.AssignmentColumns([]string{"holder", "held_until"}),
		Where:     clause.Where{Exprs: []clause.Expression{consumerLease.Free(r.cfg.Holder, now)}}}).Create(&row)
	if res.Error != nil || res.RowsAffected == 0 {
		return time.Time{}, res.Error
	}
	return row.HeldUntil, nil
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
