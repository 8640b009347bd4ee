package orders

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"gorm.io/gorm"
)

// The changes staff make to a product's units on hand. Units held by
// unpaid orders stay theirs: a count may not go below them, nor a write-off take them.
const (
	Count      = "count"       // what staff counted: it replaces on hand
	Received   = "received"    // a delivery: added to on hand
	WrittenOff = "written-off" // lost, broken or stolen: taken off on hand
)

const MaxUnits = 1_000_000 // the most units one change may name

var ErrUnknownSKU = errors.New("no product has this SKU")

// StockChange is one change of the units on hand of the product with SKU,
// for Reason (which a count may leave out).
type StockChange struct {
	SKU, Kind, Reason string
	Units             int
}

// SetStock sets the units on hand of the product to staff's count, in a
// transaction of its own.
func (s Store) SetStock(ctx context.Context, sku string, units int) (p models.Product, err error) {
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		p, err = changeStock(tx, StockChange{SKU: sku, Kind: Count, Units: units})
		return err
	})
	return p, err
}

// Restock makes the change, by staff alone, and audits it: an act on no
// order, its reason saying what changed.
func (s Store) Restock(tx *gorm.DB, by models.User, c StockChange, now time.Time) (models.Product, error) {
	if err := accounts.StaffNow(tx, by.ID); err != nil {
		return models.Product{}, err
	}
	p, err := changeStock(tx, c)
	if err != nil {
		return models.Product{}, err
	}
	said := fmt.Sprintf("%s %d: %d units on hand", c.Kind, c.Units, p.OnHand())
	if c.Reason != "" {
		said += " (" + c.Reason + ")"
	}
	return p, audit.Audit(tx, audit.Entry{Action: audit.ActionRestocked, Actor: audit.UserActor(by), SubjectID: p.ID, Reason: said, At: now})
}

// changeStock makes the change on the product's stock, all its slots locked,
// and answers the product as changed.
func changeStock(tx *gorm.DB, c StockChange) (models.Product, error) {
	c.Reason = strings.TrimSpace(c.Reason)
	least := 1
	if c.Kind == Count {
		least = 0
	}
	switch {
	case c.Units < least || c.Units > MaxUnits:
		return models.Product{}, models.Invalid(models.FieldError{Field: "stock", Message: fmt.Sprintf("must be a whole number from %d to %d", least, MaxUnits)})
	case c.Kind != Count && c.Reason == "":
		return models.Product{}, models.Invalid(models.FieldError{Field: "reason", Message: "must say why the units were " + strings.ReplaceAll(c.Kind, "-", " ")})
	}
	p, rows, err := lockSlots(tx, "sku", c.SKU)
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return p, fmt.Errorf("%w: %q", ErrUnknownSKU, c.SKU)
	}
	if err != nil {
		return p, err
	}
	total := p.Stock
	switch c.Kind {
	case Count:
		if c.Units < p.Held {
			return p, models.Invalid(models.FieldError{Field: "stock", Message: fmt.Sprintf("is less than the %d held by unpaid orders: cancel some of them first", p.Held)})
		}
		total = c.Units - p.Held
	case Received:
		total += c.Units
	case WrittenOff:
		if c.Units > p.Stock {
			return p, models.Invalid(models.FieldError{Field: "stock", Message: fmt.Sprintf("is more than the %d for sale: units held by unpaid orders cannot be written off", p.Stock)})
		}
		total -= c.Units
	default:
		return p, models.Invalid(models.FieldError{Field: "change", Message: fmt.Sprintf("must be %s, %s or %s", Count, Received, WrittenOff)})
	}
	p.Stock = total
	return p, spread(tx, p.ID, rows, p.StockSlots, total, -1, 0)
}
