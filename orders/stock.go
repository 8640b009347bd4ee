package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shop/shop/models"
	"gorm.io/gorm"
)

// reserve takes each line's quantity off its product's stock through tx,
// one conditional statement a line, so stock never goes below 0 however
// many orders race for the last unit. A line it cannot cover makes the
// whole order an ErrOutOfStock, naming every such line: the caller's
// transaction, rolled back, then reserved nothing. The lines are taken in
// the order of their products' ids, so two orders on PostgreSQL lock the
// rows they share in the same order and never deadlock.
func reserve(tx *gorm.DB, items []models.OrderItem) error {
	lines := slices.Clone(items)
	slices.SortFunc(lines, func(a, b models.OrderItem) int { return cmp.Compare(a.ProductID, b.ProductID) })
	var short []models.Shortage
	for _, it := range lines {
		res := tx.Model(&models.Product{}).Where("id = ? AND stock >= ?", it.ProductID, it.Quantity).
			Update("stock", gorm.Expr("stock - ?", it.Quantity))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			continue
		}
		var left int
		if err := tx.Model(&models.Product{}).Where("id = ?", it.ProductID).Select("stock").Scan(&left).Error; err != nil {
			return err
		}
		short = append(short, models.Shortage{ProductID: it.ProductID, Name: it.Name, Left: left, Asked: it.Quantity})
	}
	if short != nil {
		return outOfStock(items, short)
	}
	return nil
}

// outOfStock is the ErrOutOfStock of the lines short, its detail naming
// each product and how many are left, its fields the lines at fault.
func outOfStock(items []models.OrderItem, short []models.Shortage) *models.Error {
	var said []string
	var fields []models.FieldError
	for i, it := range items {
		j := slices.IndexFunc(short, func(s models.Shortage) bool { return s.ProductID == it.ProductID })
		if j < 0 {
			continue
		}
		s := short[j]
		said = append(said, fmt.Sprintf("%s: %s, %d asked", s.Name, unitsLeft(s.Left), s.Asked))
		message := fmt.Sprintf("is more than the %d left", s.Left)
		if s.Left == 0 {
			message = "is more than is left: none"
		}
		fields = append(fields, models.FieldError{Field: fmt.Sprintf("items[%d].quantity", i), Message: message})
	}
	e := models.ErrOutOfStock.With(strings.Join(said, "; ") + ". Nothing was ordered.")
	e.Fields, e.Shortages = fields, short
	return e
}

func unitsLeft(n int) string {
	switch n {
	case 0:
		return "none left"
	case 1:
		return "1 left"
	}
	return fmt.Sprintf("%d left", n)
}

// returnStock gives a cancelled order's units back to stock through tx,
// once: the order's restocked_at is set by the one conditional statement
// that may, so a second cancel, a replay or an expiry of the same order
// returns nothing more. An order that never took units (the last
// release's) gives none back.
func returnStock(tx *gorm.DB, orderID string, now time.Time) error {
	res := tx.Model(&models.Order{}).Where("id = ? AND status = ? AND stock_reserved AND restocked_at IS NULL", orderID, models.OrderCancelled).
		Update("restocked_at", now)
	if res.Error != nil || res.RowsAffected != 1 {
		return res.Error
	}
	var items []models.OrderItem
	if err := tx.Where("order_id = ?", orderID).Order("product_id").Find(&items).Error; err != nil {
		return err
	}
	for _, it := range items {
		err := tx.Model(&models.Product{}).Where("id = ?", it.ProductID).
			Update("stock", gorm.Expr("stock + ?", it.Quantity)).Error
		if err != nil {
			return err
		}
	}
	return nil
}

// ErrUnknownSKU: no product of the catalog has the SKU.
var ErrUnknownSKU = errors.New("no product has this SKU")

// SetStock sets the units on hand of the product with the SKU: staff's
// count, which replaces what was there. Setting the same count again
// changes nothing.
func (s Store) SetStock(ctx context.Context, sku string, units int) (models.Product, error) {
	if units < 0 {
		return models.Product{}, fmt.Errorf("stock must be 0 or more, not %d", units)
	}
	var p models.Product
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&models.Product{}).Where("sku = ?", sku).Update("stock", units)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: %q", ErrUnknownSKU, sku)
		}
		return tx.Where("sku = ?", sku).Take(&p).Error
	})
	return p, err
}
