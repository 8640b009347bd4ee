package orders

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/models"
)

// A product's units for sale may lie over several slots, so that a flash
// sale's orders, each reserving from one slot at random, do not all queue
// on one row lock (PostgreSQL holds it until COMMIT). Slot 0 is the
// product's own row; slots 1 to StockSlots-1 are rows of stock_slots, made
// by a split and never deleted (an order's line names the slot it holds
// from). Stock and held are the sums over all of a product's rows; only
// slots below StockSlots are offered units.

// MaxStockSlots is the most slots a product's stock may be split over.
const MaxStockSlots = 64

// stockSlot is one of a split product's rows beyond its own.
type stockSlot struct {
	ProductID string `gorm:"primaryKey;size:36"`
	Slot      int    `gorm:"primaryKey"`
	Stock     int    `gorm:"not null"`
	Held      int    `gorm:"not null"`
}

func (stockSlot) TableName() string { return "stock_slots" }

// units are one slot's units.
type units struct{ Slot, Stock, Held int }

// slotRow is the row of a product's slot: the product's own for slot 0.
func slotRow(tx *gorm.DB, productID string, slot int) *gorm.DB {
	model, _, where, args := slotWhere(productID, slot)
	return tx.Model(model).Where(where, args...)
}

// slotWhere is slotRow's model, its table, the condition (an AND of
// equalities) and its values.
func slotWhere(productID string, slot int) (model any, table, where string, args []any) {
	if slot == 0 {
		return &models.Product{}, "products", "id = ?", []any{productID}
	}
	return &stockSlot{}, stockSlot{}.TableName(), "product_id = ? AND slot = ?", []any{productID, slot}
}

// pickSlot is the slot a line of the product reserves from, any at random.
func pickSlot(p models.Product) int {
	if p.StockSlots <= 1 {
		return 0
	}
	return rand.IntN(p.StockSlots)
}

// lockSlots reads the product whose column is value and every row of its
// slots, in slot order, each locked until the transaction ends (the same
// order as every statement that locks more than one of them). The product's
// Stock and Held are then the sums over its rows.
func lockSlots(tx *gorm.DB, column, value string) (models.Product, []units, error) {
	lock := clause.Locking{Strength: "NO KEY UPDATE"} // an order's lines only share it (their key)
	var p models.Product
	if err := tx.Clauses(lock).Where(column+" = ?", value).Take(&p).Error; err != nil {
		return p, nil, err
	}
	var more []units
	if err := tx.Model(&stockSlot{}).Clauses(lock).Where("product_id = ?", p.ID).Order("slot").Find(&more).Error; err != nil {
		return p, nil, err
	}
	rows := append([]units{{Slot: 0, Stock: p.Stock, Held: p.Held}}, more...)
	p.Stock, p.Held = 0, 0
	for _, r := range rows {
		p.Stock, p.Held = p.Stock+r.Stock, p.Held+r.Held
	}
	return p, rows, nil
}

// spread sets the product's units for sale to total, shared evenly over its
// slots below active (the others keep none), and adds take to the held
// units of slot takeFrom: one statement a row that changes. A slot to take
// from that has no row is an error: its units would be lost.
func spread(tx *gorm.DB, productID string, rows []units, active, total int, takeFrom, take int) error {
	n, took := 0, take == 0
	for _, r := range rows {
		if r.Slot < active {
			n++
		}
	}
	i := 0
	for _, r := range rows {
		want := 0
		if r.Slot < active {
			want = total / n
			if i < total%n {
				want++
			}
			i++
		}
		update := map[string]any{}
		if want != r.Stock {
			update["stock"] = want
		}
		if r.Slot == takeFrom && take > 0 {
			update["held"] = gorm.Expr("held + ?", take)
			took = true
		}
		if len(update) == 0 {
			continue
		}
		if err := slotRow(tx, productID, r.Slot).Updates(update).Error; err != nil {
			return err
		}
	}
	if !took {
		return fmt.Errorf("stock slot %d of product %s has no row", takeFrom, productID)
	}
	return nil
}

// rebalance reserves the line when its slot has too few units: with every
// slot of the product locked, the units left over after the line's are
// shared out again, so no order is refused while the product has enough in
// all. ok is false, and left the units for sale, when it has not.
func rebalance(tx *gorm.DB, it models.OrderItem) (ok bool, left int, err error) {
	p, rows, err := lockSlots(tx, "id", it.ProductID)
	if err != nil || p.Stock < it.Quantity {
		return false, p.Stock, err
	}
	return true, 0, spread(tx, p.ID, rows, p.StockSlots, p.Stock-it.Quantity, it.Slot, it.Quantity)
}

// SplitStock spreads the units for sale of the product with sku over n
// slots (1 gathers them back into its own row), in a transaction of its own.
func (s Store) SplitStock(ctx context.Context, sku string, n int) (p models.Product, err error) {
	if n < 1 || n > MaxStockSlots {
		return p, fmt.Errorf("SLOTS must be from 1 to %d, not %d", MaxStockSlots, n)
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []units
		p, rows, err = lockSlots(tx, "sku", sku)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("%w: %q", ErrUnknownSKU, sku)
		}
		if err != nil {
			return err
		}
		var made []stockSlot
		for slot := len(rows); slot < n; slot++ {
			made = append(made, stockSlot{ProductID: p.ID, Slot: slot})
			rows = append(rows, units{Slot: slot})
		}
		if len(made) > 0 {
			if err := tx.Create(&made).Error; err != nil {
				return err
			}
		}
		p.StockSlots = n
		if err := tx.Model(&models.Product{}).Where("id = ?", p.ID).Update("stock_slots", n).Error; err != nil {
			return err
		}
		return spread(tx, p.ID, rows, n, p.Stock, -1, 0)
	})
	return p, err
}

// withSlots reads products with their Stock and Held summed over all their
// rows, in one statement (one snapshot).
func withSlots(db *gorm.DB) *gorm.DB {
	return db.Model(&models.Product{}).
		Select("products.id, products.sku, products.name, products.price_cents, products.currency, products.stock_slots, " +
			"products.stock + COALESCE(s.stock, 0) AS stock, products.held + COALESCE(s.held, 0) AS held").
		Joins("LEFT JOIN (SELECT product_id, SUM(stock) AS stock, SUM(held) AS held FROM stock_slots GROUP BY product_id) s ON s.product_id = products.id")
}
