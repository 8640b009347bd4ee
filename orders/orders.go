// Package orders places, reads, cancels and expires orders, and keeps the
// stock their lines reserve and the events their facts record.
package orders

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

// Limits of one order: no shopper holds a product's whole stock with one.
// On PostgreSQL each line of a split product may keep a savepoint's
// subtransaction until COMMIT: PostgreSQL caches 64 a backend, so MaxLines
// stays below that.
const (
	MinQuantity = 1
	MaxQuantity = 10
	MaxLines    = 50
)

// Store reads the catalog and orders, and writes orders and their stock.
// A shopper may hold at most MaxPending unpaid orders (0: any number).
type Store struct {
	DB         *gorm.DB
	MaxPending int
}

type ItemInput struct {
	ProductID string `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

func (s Store) Products(ctx context.Context) ([]models.Product, error) {
	var products []models.Product
	err := withSlots(s.DB.WithContext(ctx)).Order("products.name").Find(&products).Error
	return products, err
}

// CreateOrder checks the items against the catalog, writes the order and
// reserves its units through tx: all of it or, rolled back, none.
func (s Store) CreateOrder(tx *gorm.DB, userID, derivedKey string, items []ItemInput) (models.Order, error) {
	if len(items) == 0 {
		return models.Order{}, models.Invalid(models.FieldError{Field: "items", Message: "must list at least one product"})
	}
	if len(items) > MaxLines {
		return models.Order{}, models.Invalid(models.FieldError{Field: "items", Message: fmt.Sprintf("must list at most %d products", MaxLines)})
	}
	var fields []models.FieldError
	ids := make([]string, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		field := fmt.Sprintf("items[%d]", i)
		if item.Quantity < MinQuantity || item.Quantity > MaxQuantity {
			fields = append(fields, models.FieldError{Field: field + ".quantity", Message: fmt.Sprintf("must be between %d and %d", MinQuantity, MaxQuantity)})
		}
		// Each product once: reserve then takes at most one slot of a
		// product, which keeps its lock order (orders/slots.go) deadlock-free.
		if seen[item.ProductID] {
			fields = append(fields, models.FieldError{Field: field + ".product_id", Message: "is listed twice"})
		}
		seen[item.ProductID] = true
		ids = append(ids, item.ProductID)
	}
	products, number, counted, err := s.productsAndNumber(tx, userID, ids)
	if err != nil {
		return models.Order{}, err
	}
	byID := make(map[string]models.Product, len(products))
	for _, p := range products {
		byID[p.ID] = p
	}
	// A version 7 id, time-ordered: the orders a commit writes share index
	// pages (orders, and the order id of lines, audit entries and events)
	// instead of each dirtying pages of its own. It tells when the order was
	// made, as the order itself does.
	order := models.Order{ID: newOrderID(), Number: number, UserID: userID, Status: models.OrderPending, DerivedKey: derivedKey,
		StockReserved: true}
	for i, item := range items {
		p, ok := byID[item.ProductID]
		if !ok {
			fields = append(fields, models.FieldError{Field: fmt.Sprintf("items[%d].product_id", i), Message: "is not a product of the catalog"})
			continue
		}
		if order.Currency == "" {
			order.Currency = p.Currency
		} else if order.Currency != p.Currency {
			fields = append(fields, models.FieldError{Field: fmt.Sprintf("items[%d].product_id", i), Message: "is priced in another currency than the rest of the order"})
		}
		order.Items = append(order.Items, models.OrderItem{ProductID: p.ID, SKU: p.SKU, Name: p.Name, UnitPriceCents: p.PriceCents,
			Quantity: item.Quantity, Slot: pickSlot(p)})
		order.TotalCents += p.PriceCents * int64(item.Quantity)
	}
	if fields != nil {
		return models.Order{}, models.Invalid(fields...)
	}
	if !counted {
		return models.Order{}, models.ErrTooManyPendingOrders.With(fmt.Sprintf("You already have %d unpaid orders, the most the shop keeps at once; nothing was ordered. Pay or cancel one of them, then send this order again.", s.MaxPending))
	}
	if err := s.writeAndReserve(tx, &order); err != nil {
		return models.Order{}, err
	}
	return order, nil
}

// writeAndReserve writes the placed order (write) and reserves its units,
// the last writes before the completion: each product's row is locked
// (PostgreSQL) until COMMIT, and a hot product's orders queue on it. The
// lines' takes ride in write's statement (on PostgreSQL one statement, a
// line's row locked only once the line before it was taken, as reserve
// takes them). The line not taken, and those after it, go to reserve; on
// PostgreSQL, when a line up to it is on a split slot, the statement is
// first undone to a savepoint and written again: a take that waited keeps
// its row's lock even when it finds too few units, and rebalance must not
// hold a later slot's (reserve).
func (s Store) writeAndReserve(tx *gorm.DB, order *models.Order) error {
	lines := byProduct(order.Items)
	split := func(it models.OrderItem) bool { return it.Slot > 0 }
	saved := database.IsPostgres(tx) && slices.ContainsFunc(lines, split)
	if saved {
		if err := tx.SavePoint("placed").Error; err != nil {
			return err
		}
	}
	taken, err := s.write(tx, order, takes(lines)...)
	if err != nil || taken == len(lines) {
		return err
	}
	if saved && slices.ContainsFunc(lines[:taken+1], split) {
		if err := tx.RollbackTo("placed").Error; err != nil {
			return err
		}
		if _, err := s.write(tx, order); err != nil {
			return err
		}
		taken = 0
	}
	return reserve(tx, order.Items, taken)
}

func newOrderID() string {
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString() // no clock or entropy for a version 7: a version 4
}

// FirstOrderNumber is a shop's first order number: "Order #1001".
const FirstOrderNumber = 1001

// productsAndNumber reads the products an order lists and, in the same
// statement, the order's number: a sequence's on PostgreSQL, so instances
// never wait for it (an order refused or rolled back leaves a gap, as a
// sequence does anyway); on SQLite the highest plus one, safe since the
// transaction holds the write lock from BEGIN. The number is an
// uncorrelated subquery's, run once however many products there are (none
// listed: no number, and the order is refused). Not a MATERIALIZED CTE: on
// SQLite that builds and frees a temporary b-tree on every order, which cost
// ten times the rest of the statement.
//
// It also counts the order among the shopper's unpaid ones (counted false:
// they already hold s.MaxPending), with one conditional UPDATE, so two
// instances never both take the last place: on PostgreSQL a data-modifying
// CTE of the same statement, on SQLite a statement before it. A refused
// order's count is rolled back with the rest of it.
func (s Store) productsAndNumber(tx *gorm.DB, userID string, ids []string) (products []models.Product, number int64, counted bool, err error) {
	count, vars := s.countPending(userID)
	read := fmt.Sprintf("SELECT products.*, (SELECT COALESCE(MAX(number), %d) + 1 FROM orders) AS number", FirstOrderNumber-1)
	if database.IsPostgres(tx) {
		read = "WITH counted AS (" + count + " RETURNING 1) " +
			"SELECT products.*, (SELECT nextval('order_numbers')) AS number, EXISTS (SELECT FROM counted) AS counted"
	} else {
		res := tx.Exec(count, vars...)
		counted, vars, err = res.RowsAffected == 1, nil, res.Error
		if err != nil {
			return nil, 0, false, err
		}
	}
	var rows []struct {
		models.Product `gorm:"embedded"`
		Number         int64
		Counted        bool
	}
	err = tx.Raw(read+" FROM products WHERE products.id IN ?", append(vars, ids)...).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, 0, true, err // none of them a product: the order is refused for that
	}
	products = make([]models.Product, len(rows))
	for i, r := range rows {
		products[i] = r.Product
	}
	return products, rows[0].Number, counted || rows[0].Counted, nil
}

// countPending is the UPDATE that counts an order among the shopper's unpaid
// ones, if they hold fewer than s.MaxPending (0: any number).
func (s Store) countPending(userID string) (string, []any) {
	if s.MaxPending > 0 {
		return "UPDATE users SET pending_orders = pending_orders + 1 WHERE id = ? AND pending_orders < ?", []any{userID, s.MaxPending}
	}
	return "UPDATE users SET pending_orders = pending_orders + 1 WHERE id = ?", []any{userID}
}

// write writes the placed order, its lines, its audit entry and its event,
// then steps, in one statement where the database allows
// (database.Chained): nothing is read back. taken is how many steps, in
// turn, changed their row.
func (s Store) write(tx *gorm.DB, order *models.Order, steps ...database.Step) (taken int, err error) {
	inserts, send := database.Chained(tx)
	if err := audit.Audit(inserts, audit.Entry{OrderID: order.ID, Action: audit.ActionOrderPlaced, AmountCents: audit.Cents(order.TotalCents)}); err != nil {
		return 0, err
	}
	if err := inserts.Create(order).Error; err != nil {
		return 0, err
	}
	order.Payments = []models.Payment{}
	if err := orderEvent(inserts, outbox.OrderPlaced, order.ID, *order); err != nil {
		return 0, err
	}
	return send(steps...)
}

// Order finds one of the user's orders with its lines.
func (s Store) Order(ctx context.Context, userID, id string) (models.Order, error) {
	return OwnOrder(s.withLines(s.DB.WithContext(ctx)), userID, id)
}

// OwnOrder reads the order id if it is the user's: anyone else's is as
// missing as one that does not exist.
func OwnOrder(db *gorm.DB, userID, id string) (models.Order, error) {
	return AnyOrder(db.Where("user_id = ?", userID), id)
}

// Whose finds an order by id among the orders someone may act on.
type Whose func(db *gorm.DB, id string) (models.Order, error)

func OwnedBy(userID string) Whose {
	return func(db *gorm.DB, id string) (models.Order, error) { return OwnOrder(db, userID, id) }
}

// OrdersOf are the orders the user may act on: every user's for staff, a
// shopper's own.
func OrdersOf(u models.User) Whose {
	if u.IsStaff() {
		return AnyOrder
	}
	return OwnedBy(u.ID)
}

// AnyOrder reads the order id, whoever's it is.
func AnyOrder(db *gorm.DB, id string) (models.Order, error) {
	var order models.Order
	if err := KnownID(id); err != nil {
		return models.Order{}, err
	}
	return order, models.NotFoundAs(db.Where("id = ?", id).Take(&order).Error, models.ErrNotFound)
}

// KnownID is ErrNotFound for an id that is no UUID, so that no query is
// sent with it (PostgreSQL refuses some bytes).
func KnownID(id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return models.ErrNotFound
	}
	return nil
}

func (s Store) withLines(db *gorm.DB) *gorm.DB {
	return db.
		Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Preload("Attempts", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Preload("Refunds", func(db *gorm.DB) *gorm.DB {
			return db.Where("state IN ?", []models.State{models.Succeeded, models.Pending}).Order("created_at, id")
		})
}

// Event records the event of one fact of the order (factID: its row's id):
// the order as the API shows it once the fact is written.
func Event(tx *gorm.DB, typ, factID, orderID string) error {
	order, err := AnyOrder(Store{}.withLines(tx), orderID)
	if err != nil {
		return err
	}
	return orderEvent(tx, typ, factID, order)
}

// orderEvent records the event of a fact of order, which must be whole, as
// a placed order is in memory: placing one reads nothing back.
func orderEvent(tx *gorm.DB, typ, factID string, order models.Order) error {
	return outbox.Record(tx, typ, factID, order.ID, models.ViewOrder(order))
}
