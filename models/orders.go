package models

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/outbox"
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

// CreateOrder validates the items against the catalog, reserves their
// quantities and writes the order through tx, under the operation's derived
// key: all of it or, rolled back, none.
func (s Shop) CreateOrder(tx *gorm.DB, userID, derivedKey string, items []ItemInput) (Order, error) {
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
	order := Order{ID: uuid.NewString(), UserID: userID, Status: OrderPending, DerivedKey: derivedKey}
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
	if err := reserve(tx, order.Items); err != nil {
		return Order{}, err
	}
	order.StockReserved = true
	number, err := nextOrderNumber(tx)
	if err != nil {
		return Order{}, err
	}
	order.Number = number
	if err := Audit(tx, Entry{OrderID: order.ID, Action: ActionOrderPlaced, AmountCents: cents(order.TotalCents)}); err != nil {
		return Order{}, err
	}
	if err := tx.Create(&order).Error; err != nil {
		return Order{}, err
	}
	order.Payments = []Payment{}
	if err := orderEvent(tx, outbox.OrderPlaced, order.ID, order); err != nil {
		return Order{}, err
	}
	return order, nil
}

// Order finds one of the user's orders with its items and payments.
func (s Shop) Order(ctx context.Context, userID, id string) (Order, error) {
	return ownOrder(s.withLines(s.DB.WithContext(ctx)), userID, id)
}

// ownOrder reads the order id if it belongs to the user: anyone else's order
// is as missing as one that does not exist.
func ownOrder(db *gorm.DB, userID, id string) (Order, error) {
	return anyOrder(db.Where("user_id = ?", userID), id)
}

// whose finds an order by id among the orders someone may act on.
type whose func(db *gorm.DB, id string) (Order, error)

// ownedBy are the user's own orders.
func ownedBy(userID string) whose {
	return func(db *gorm.DB, id string) (Order, error) { return ownOrder(db, userID, id) }
}

// anyOrder reads the order id, whoever's it is: for staff, who act on
// every user's orders.
func anyOrder(db *gorm.DB, id string) (Order, error) {
	var order Order
	if err := knownID(id); err != nil {
		return Order{}, err
	}
	err := db.Where("id = ?", id).Take(&order).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, ErrNotFound
	}
	return order, err
}

// knownID is ErrNotFound for an id that is no UUID, so that no query is
// sent with it: none can name a row (and PostgreSQL refuses some bytes).
func knownID(id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return ErrNotFound
	}
	return nil
}

func (s Shop) withLines(db *gorm.DB) *gorm.DB {
	return db.
		Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Preload("Attempts", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Preload("Refunds", func(db *gorm.DB) *gorm.DB {
			return db.Where("state IN ?", []State{Succeeded, Pending}).Order("created_at, id")
		})
}
