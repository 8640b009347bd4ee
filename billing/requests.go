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
// given back than was taken, whatever keys are used. Charges and refunds
// are two uses of one protocol for a provider request in doubt, each of
// whose writes is fenced by the order's hold (orders/holds.go):
//
//   - begin (BeginPayment, BeginRefund) takes the hold and, in the same
//     transaction, records the operation's request in doubt — but only if
//     no earlier request of its kind is in doubt for the order. The
//     provider is called after that commit.
//   - A request in doubt is resolved before another of its kind may be
//     written for the order, by whoever holds the order: the next operation,
//     the reconciler or a webhook (HoldForResolution). Only the provider's
//     word on the request's own key resolves it: an outcome, or a
//     definitive refusal, which proves nothing was or will be done under
//     that key (settled Failed). A passing refusal of a later request under the key
//     ("rate limited", "unauthorized") says nothing about the first.
//   - The settling transaction writes what the outcome does to the order:
//     paid, or what it has been given back.
//
// A hold is taken by one run of an operation (holder, see NewHolder), not by
// the operation: a run that outlived its lease cannot write over the run
// that took over.

// Row is a request's row: a payment attempt or a refund.
type Row interface {
	models.PaymentAttempt | models.Refund
	Base() models.Request
	TableName() string
}

// Outcome is the provider's definite answer to a request: its state, the
// provider's id of what it made, and why it declined or failed.
type Outcome struct {
	State      models.State
	ProviderID string
	Reason     string
	// NextActionURL is where the shopper authenticates, and Until when
	// that authentication expires, for an outcome that requires action.
	NextActionURL string
	Until         time.Time
}

// Kind is one use of the protocol: what may hold an order for it, and what
// busy says of it.
type Kind struct {
	// admits says why an order cannot take a request of the kind, if it
	// cannot: the rule begin checks before it takes the hold.
	admits func(models.Order) error
	// holdable are the order states in which the hold may be taken for it.
	holdable []string
	// inDoubt is busy's answer when a request of the kind is in doubt;
	// awaiting when one waits for the shopper to authenticate.
	inDoubt, awaiting *models.Error
}

// Begun is what begin found and did: the row to send, just recorded in
// doubt, or, when Unresolved, an earlier request of the kind for the order
// still in doubt (perhaps the operation's own, from a run that died), to
// resolve first.
type Begun[R Row] struct {
	Row        R
	Unresolved bool
}

// begin finds the order among those find lets the caller act on, takes its hold for holder until the given time and records
// the row that newRow makes for the operation derivedKey, under its provider
// key, in one transaction: unless an earlier request of the kind is in
// doubt, which it hands back, the hold taken.
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
		err = tx.Where("order_id = ? AND state IN ?", order.ID, models.OpenStates).Order("created_at, id").Take(&begun.Row).Error
		switch {
		case err == nil:
			begun.Unresolved = true
			return nil
		case !errors.Is(err, gorm.ErrRecordNotFound):
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

// providerKey is the key a new request of the operation derivedKey is sent
// under: the derived key itself the first time; after requests the provider
// refused, the key and a number, because a provider that saved its refusal
// under a key answers every later request with that key the same way.
func providerKey[R Row](tx *gorm.DB, derivedKey string) (string, error) {
	var tried int64
	if err := tx.Model(new(R)).Where("derived_key = ?", derivedKey).Count(&tried).Error; err != nil || tried == 0 {
		return derivedKey, err
	}
	return fmt.Sprintf("%s-%d", derivedKey, tried+1), nil
}

// busy says why the order's hold could not be taken for a request of the
// kind: the order changed meanwhile, a request of the kind is in doubt at
// the provider, or another operation holds it.
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

// HoldForResolution takes the hold of the row's order for holder, if no
// live operation holds it and the row is still open, in one transaction,
// and marks the row asked about now. A row that waits for the shopper holds
// its order itself: that hold is taken over, and handed back by settle if
// the shopper is still to answer. Many instances may call it at once for
// one row: one gets the hold.
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

// Stale lists rows in doubt whose order no live operation holds — their
// own operation died, lost its database link, or gave up — and rows that
// wait for the shopper, to be looked up; those asked about least recently
// first, so that a request the provider cannot answer does not keep the
// others waiting.
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

// MarkSent records that a row's request is being sent (again) now.
func MarkSent[R Row](ctx context.Context, s Ledger, row R, now time.Time) error {
	return s.DB.WithContext(ctx).Model(&row).Where("id = ?", row.Base().ID).Update("sent_at", now).Error
}

// settle writes, through tx, what the provider answered a row in doubt:
// the order's update (its hold let go, and what the outcome does to it)
// and the row's. holder must still hold the order, and the row must still
// be open: otherwise another run took the order over, or already recorded
// this answer, and nothing is written (ErrPaymentInProgress).
func settle[R Row](tx *gorm.DB, row R, holder string, order, update map[string]any) error {
	// Already recorded: nothing to write. A read takes no lock.
	var current R
	if err := tx.Select("state").Where("id = ?", row.Base().ID).Take(&current).Error; err != nil {
		return err
	}
	if !current.Base().State.Open() {
		return models.ErrPaymentInProgress
	}
	// The order first, then the row: the order that begin and
	// HoldForResolution lock in, so that two transactions never wait on
	// each other.
	res := tx.Model(&models.Order{}).Where("id = ? AND held_by = ?", row.Base().OrderID, holder).Updates(order)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return models.ErrPaymentInProgress // the hold passed to another run, which resolves the row itself
	}
	return move(tx, row, current.Base().State, update)
}

// move writes fields on the row, if it is still in the state from:
// ErrPaymentInProgress, and nothing written, when it moved meanwhile.
func move[R Row](tx *gorm.DB, row R, from models.State, fields map[string]any) error {
	res := tx.Model(new(R)).Where("id = ? AND state = ?", row.Base().ID, from).Updates(fields)
	if res.Error == nil && res.RowsAffected != 1 {
		return models.ErrPaymentInProgress
	}
	return res.Error
}

// Late is what the provider's later word on a request it had answered
// did: Moved when it moved the request; Label names it in metrics and
// Warning tells staff what to do, when it is a surprise (money moved that
// the shop had recorded as not moved).
type Late struct {
	Moved          bool
	Label, Warning string
}

// settleLate is the protocol's settle of a request whose outcome came late:
// under holder's hold of the order, taken and let go in tx, it moves the row
// from the answer it had to what update, decided under the hold, writes.
// ErrPaymentInProgress, and nothing written, when a live operation holds
// the order or the row moved meanwhile.
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

// Ledger writes and reads the money's rows: attempts, payments, refunds
// and refund requests, each write fenced by the order's hold.
type Ledger struct {
	DB *gorm.DB
}
