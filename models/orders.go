package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Limits of one order.
const (
	MinQuantity = 1
	MaxQuantity = 100
	MaxLines    = 50
)

// Shop reads the catalog and orders, and makes the order and payment writes.
type Shop struct {
	DB *gorm.DB
}

// ItemInput is one requested line of an order.
type ItemInput struct {
	ProductID string `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

// Products lists the catalog by name.
func (s Shop) Products(ctx context.Context) ([]Product, error) {
	var products []Product
	err := s.DB.WithContext(ctx).Order("name").Find(&products).Error
	return products, err
}

// CreateOrder validates the items against the catalog and writes the order
// through tx. ref is the operation's derived idempotency key.
func (s Shop) CreateOrder(tx *gorm.DB, userID, ref string, items []ItemInput) (Order, error) {
	if len(items) == 0 {
		return Order{}, Invalid(FieldError{"items", "must list at least one product"})
	}
	if len(items) > MaxLines {
		return Order{}, Invalid(FieldError{"items", fmt.Sprintf("must list at most %d products", MaxLines)})
	}
	var fields []FieldError
	ids := make([]string, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		field := fmt.Sprintf("items[%d]", i)
		if item.Quantity < MinQuantity || item.Quantity > MaxQuantity {
			fields = append(fields, FieldError{field + ".quantity", fmt.Sprintf("must be between %d and %d", MinQuantity, MaxQuantity)})
		}
		if seen[item.ProductID] {
			fields = append(fields, FieldError{field + ".product_id", "is listed twice"})
		}
		seen[item.ProductID] = true
		ids = append(ids, item.ProductID)
	}
	var products []Product
	if err := tx.Where("id IN ?", ids).Find(&products).Error; err != nil {
		return Order{}, err
	}
	byID := make(map[string]Product, len(products))
	for _, p := range products {
		byID[p.ID] = p
	}
	order := Order{ID: uuid.NewString(), UserID: userID, Status: OrderPending, IdempotencyRef: ref}
	for i, item := range items {
		p, ok := byID[item.ProductID]
		if !ok {
			fields = append(fields, FieldError{fmt.Sprintf("items[%d].product_id", i), "is not a product of the catalog"})
			continue
		}
		if order.Currency == "" {
			order.Currency = p.Currency
		} else if order.Currency != p.Currency {
			fields = append(fields, FieldError{fmt.Sprintf("items[%d].product_id", i), "is priced in another currency than the rest of the order"})
		}
		order.Items = append(order.Items, OrderItem{ProductID: p.ID, SKU: p.SKU, Name: p.Name, UnitPriceCents: p.PriceCents, Quantity: item.Quantity})
		order.TotalCents += p.PriceCents * int64(item.Quantity)
	}
	if fields != nil {
		return Order{}, Invalid(fields...)
	}
	if err := tx.Create(&order).Error; err != nil {
		return Order{}, err
	}
	order.Payments = []Payment{}
	return order, nil
}

// Order finds one of the user's orders with its items and payments.
func (s Shop) Order(ctx context.Context, userID, id string) (Order, error) {
	return ownOrder(s.withLines(s.DB.WithContext(ctx)), userID, id)
}

// ownOrder reads the order id if it belongs to the user: anyone else's order
// is as missing as one that does not exist.
func ownOrder(db *gorm.DB, userID, id string) (Order, error) {
	var order Order
	if _, err := uuid.Parse(id); err != nil {
		return Order{}, ErrNotFound
	}
	err := db.Where("id = ? AND user_id = ?", id, userID).Take(&order).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, ErrNotFound
	}
	return order, err
}

func (s Shop) withLines(db *gorm.DB) *gorm.DB {
	return db.
		Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") })
}

// HoldForPayment reserves the user's order for the payment operation ref
// until the given time, so that two payment operations with different keys
// cannot both charge it. The same operation (a retry, or a re-run after a
// crash) may take its own hold again.
func (s Shop) HoldForPayment(ctx context.Context, userID, orderID, ref string, now, until time.Time) (Order, error) {
	order, err := ownOrder(s.DB.WithContext(ctx), userID, orderID)
	if err != nil {
		return Order{}, err
	}
	if order.Status == OrderPaid {
		return Order{}, ErrOrderPaid
	}
	res := s.DB.WithContext(ctx).Model(&Order{}).
		Where("id = ? AND status = ?", order.ID, OrderPending).
		Where("payment_lock IS NULL OR payment_lock = ? OR payment_locked_until <= ?", ref, now).
		Updates(map[string]any{"payment_lock": ref, "payment_locked_until": until})
	if res.Error != nil {
		return Order{}, res.Error
	}
	if res.RowsAffected == 1 {
		return order, nil
	}
	if err := s.DB.WithContext(ctx).Select("status").Where("id = ?", order.ID).Take(&order).Error; err != nil {
		return Order{}, err
	}
	if order.Status == OrderPaid {
		return Order{}, ErrOrderPaid
	}
	return Order{}, ErrPaymentInProgress
}

// ExtendPaymentHold moves the end of ref's hold on the order, if ref still
// holds it: a payment operation that is slow but alive keeps the order.
func (s Shop) ExtendPaymentHold(ctx context.Context, orderID, ref string, until time.Time) error {
	return s.DB.WithContext(ctx).Model(&Order{}).
		Where("id = ? AND status = ? AND payment_lock = ?", orderID, OrderPending, ref).
		Update("payment_locked_until", until).Error
}

// ReleasePayment lets go of the hold of ref without recording a payment, when
// the provider could not be reached.
func (s Shop) ReleasePayment(ctx context.Context, orderID, ref string) error {
	return s.DB.WithContext(ctx).Model(&Order{}).
		Where("id = ? AND payment_lock = ?", orderID, ref).
		Updates(map[string]any{"payment_lock": nil, "payment_locked_until": nil}).Error
}

// RecordPayment writes the provider's answer through tx and, when it
// succeeded, marks the order paid. Both release the hold of the payment's
// operation.
func (s Shop) RecordPayment(tx *gorm.DB, order Order, payment Payment) (Payment, error) {
	payment.ID = uuid.NewString()
	payment.OrderID = order.ID
	if err := tx.Create(&payment).Error; err != nil {
		return Payment{}, err
	}
	update := map[string]any{"payment_lock": nil, "payment_locked_until": nil}
	if payment.Status == PaymentSucceeded {
		update["status"] = OrderPaid
	}
	res := tx.Model(&Order{}).Where("id = ? AND status = ? AND payment_lock = ?", order.ID, OrderPending, payment.ProviderKey).Updates(update)
	if res.Error != nil {
		return Payment{}, res.Error
	}
	if res.RowsAffected != 1 {
		// The hold passed and another operation took the order: this one must
		// not record anything.
		return Payment{}, ErrPaymentInProgress
	}
	return payment, nil
}
