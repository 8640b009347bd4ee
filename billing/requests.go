package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// The money rule: at most one successful charge per order, and never more
// given back than was taken, whatever keys are used. A charge and a refund
// are two uses of one protocol for a provider request in doubt, each write
// fenced by the order's hold (orders/holds.go):
//
//   - begin takes the hold and records the request in doubt in one
//     transaction, unless an earlier request of its kind is in doubt for the
//     order. The provider is called after that commit.
//   - A request in doubt is resolved before another of its kind is written
//     for the order, by whoever holds the order: the next operation, the
//     reconciler or a webhook. Only the provider's word on the request's own
//     key resolves it: an outcome, or a definitive refusal, which proves
//     nothing was or will be done under that key (settled Failed). A passing
//     refusal of a later request under the key says nothing about the first.
//   - The settling transaction writes what the outcome does to the order.
//
// A hold is taken by one run of an operation (orders.NewHolder), so a run
// that outlived its lease cannot write over the run that took over.

// Row is a request's row: a payment attempt or a refund.
type Row interface {
	models.PaymentAttempt | models.Refund
	Base() models.Request
	TableName() string
}

// Outcome is the provider's definite answer to a request; NextActionURL and
// Until are where and until when the shopper may authenticate.
type Outcome struct {
	State                             models.State
	ProviderID, Reason, NextActionURL string
	Until                             time.Time
}

// Kind is one use of the protocol: the rule begin checks, the order states
// it may hold, and busy's answers while a request is in doubt or awaiting.
type Kind struct {
	admits            func(models.Order) error
	holdable          []string
	inDoubt, awaiting *models.Error
}

// Begun is the row begin recorded, to send; or, when Unresolved, an earlier
// request still in doubt (perhaps the operation's own), to resolve first.
type Begun[R Row] struct {
	Row        R
	Unresolved bool
}

// begin finds the order, takes its hold for holder and records newRow's
// row, in one transaction; or hands back an earlier request in doubt.
func begin[R Row](db *gorm.DB, kind Kind, find orders.Whose, orderID, derivedKey, holder string, now, until time.Time,
	newRow func(tx *gorm.DB, order models.Order, req models.Request) (R, error)) (Begun[R], error) {
	var begun Begun[R]
	err := db.Transaction(func(tx *gorm.DB) error {
		order, err := find(tx, orderID)
		if err != nil {
			return err
		}
		if err := kind.admits(order); err != nil {
			return err
		}
		held, err := orders.TakeHold(tx.Where("status IN ?", kind.holdable), order.ID, holder, now, until)
		if err != nil {
			return err
		}
		if !held {
			return busy[R](tx, kind, order.ID)
		}
		open, unresolved, err := take[R](tx.Where("order_id = ? AND state IN ?", order.ID, models.OpenStates).Order("created_at, id"))
		if err != nil || unresolved {
			begun = Begun[R]{Row: open, Unresolved: unresolved}
			return err
		}
		req := models.Request{ID: uuid.NewString(), OrderID: order.ID, DerivedKey: derivedKey, State: models.InDoubt, SentAt: &now}
		if req.ProviderKey, err = providerKey[R](tx, derivedKey); err != nil {
			return err
		}
		if begun.Row, err = newRow(tx, order, req); err != nil {
			return err
		}
		err = tx.Create(&begun.Row).Error
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return models.ErrPaymentInProgress // another run of the operation has just written the same row
		}
		return err
	})
	return begun, err
}

// providerKey is the derived key, then the key and a number: a provider
// that saved its refusal of a key answers every later request alike.
func providerKey[R Row](tx *gorm.DB, derivedKey string) (string, error) {
	var tried int64
	if err := tx.Model(new(R)).Where("derived_key = ?", derivedKey).Count(&tried).Error; err != nil || tried == 0 {
		return derivedKey, err
	}
	return fmt.Sprintf("%s-%d", derivedKey, tried+1), nil
}

// busy says why the hold could not be taken: the order changed, a request
// of the kind is in doubt (or awaits the shopper), or another run holds it.
func busy[R Row](tx *gorm.DB, kind Kind, orderID string) error {
	var order models.Order
	if err := tx.Select("status").Where("id = ?", orderID).Take(&order).Error; err != nil {
		return err
	}
	if err := kind.admits(order); err != nil {
		return err
	}
	var states []models.State
	if err := tx.Model(new(R)).Where("order_id = ? AND state IN ?", orderID, models.OpenStates).Distinct().Pluck("state", &states).Error; err != nil {
		return err
	}
	switch {
	case slices.Contains(states, models.RequiresAction) && kind.awaiting != nil:
		return kind.awaiting
	case len(states) > 0:
		return kind.inDoubt
	}
	return models.ErrPaymentInProgress
}

// HoldForResolution takes the open row's order's hold for holder, unless a
// live run holds it (one waiting for the shopper is taken over), and marks
// the row asked about now.
func HoldForResolution[R Row](ctx context.Context, s Ledger, id, holder string, now, until time.Time) (R, bool, error) {
	var row R
	held := false
	if err := orders.KnownID(id); err != nil {
		return row, false, err
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", id).Take(&row).Error; err != nil || !row.Base().State.Open() {
			return err
		}
		var err error
		if held, err = orders.TakeHoldFrom(tx, row.Base().OrderID, holder, orders.AwaitingHolder(id), now, until); err != nil || !held {
			return err
		}
		// Read again under the hold: its last holder may have resolved it.
		if err := tx.Where("id = ?", id).Take(&row).Error; err != nil {
			return err
		}
		if !row.Base().State.Open() {
			held = false
			return tx.Model(&models.Order{}).Where("id = ? AND held_by = ?", row.Base().OrderID, holder).Updates(orders.Released()).Error
		}
		return tx.Model(&row).Where("id = ?", id).Update("updated_at", now).Error
	})
	return row, held, err
}

// Stale lists the open rows no live run holds, least recently asked first,
// so that one the provider cannot answer does not keep the others waiting.
func Stale[R Row](ctx context.Context, s Ledger, now time.Time, limit int) ([]R, error) {
	var rows []R
	t := (*new(R)).TableName()
	err := s.DB.WithContext(ctx).Model(new(R)).
		Joins("JOIN orders ON orders.id = "+t+".order_id").
		Where(t+".state IN ?", models.OpenStates).
		Where(orders.HoldFree(s.DB.Session(&gorm.Session{NewDB: true}), now).Or("orders.held_by = ? || "+t+".id", orders.AwaitingPrefix)).
		Order(t + ".updated_at, " + t + ".id").Limit(limit).
		Find(&rows).Error
	return rows, err
}

// ByKey finds the row sent under a provider key.
func ByKey[R Row](ctx context.Context, s Ledger, providerKey string) (R, bool, error) {
	return take[R](s.DB.WithContext(ctx).Where("provider_key = ?", providerKey))
}

// take reads the row the query finds, if there is one.
func take[T any](query *gorm.DB) (T, bool, error) {
	var row T
	err := query.Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, false, nil
	}
	return row, err == nil, err
}

// settle writes the provider's answer: the order's update, then the row's.
// ErrPaymentInProgress, and nothing written, when holder lost the hold or
// the row was settled already.
func settle[R Row](tx *gorm.DB, row R, holder string, order, update map[string]any) error {
	var current R // a read takes no lock
	if err := tx.Select("state").Where("id = ?", row.Base().ID).Take(&current).Error; err != nil {
		return err
	}
	if !current.Base().State.Open() {
		return models.ErrPaymentInProgress
	}
	// The order first, then the row, as begin and HoldForResolution lock
	// them: two transactions never wait on each other.
	res := tx.Model(&models.Order{}).Where("id = ? AND held_by = ?", row.Base().OrderID, holder).Updates(order)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return models.ErrPaymentInProgress // the hold passed to another run, which resolves the row itself
	}
	return move(tx, row, current.Base().State, update)
}

// move writes fields on the row if it is still in the state from.
func move[R Row](tx *gorm.DB, row R, from models.State, fields map[string]any) error {
	res := tx.Model(new(R)).Where("id = ? AND state = ?", row.Base().ID, from).Updates(fields)
	if res.Error == nil && res.RowsAffected != 1 {
		return models.ErrPaymentInProgress
	}
	return res.Error
}

// Late is what a later word on an answered request did; for money moved
// that was recorded as not, a metric label and a warning for staff.
type Late struct {
	Moved          bool
	Label, Warning string
}

// settleLate moves an answered row to what update decides, under holder's
// hold taken and let go in tx.
func settleLate[R Row](tx *gorm.DB, row R, holder string, now time.Time, update func() (map[string]any, error)) error {
	held, err := orders.TakeHold(tx, row.Base().OrderID, holder, now, now)
	if err != nil {
		return err
	}
	if !held {
		return models.ErrPaymentInProgress
	}
	fields, err := update()
	if err == nil {
		err = move(tx, row, row.Base().State, fields)
	}
	if err != nil {
		return err
	}
	return tx.Model(&models.Order{}).Where("id = ?", row.Base().OrderID).Updates(orders.Released()).Error
}

// Ledger writes and reads the money's rows.
type Ledger struct {
	DB *gorm.DB
}
