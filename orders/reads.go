package orders

// The reads of orders: the shopper's, and the staff's (every user's orders,
// one order's whole history, the requests in doubt).

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// OrdersPage lists up to limit of the user's orders with their lines,
// newest first, after p when set; more says whether any follow.
func (s Store) OrdersPage(ctx context.Context, userID string, p *database.Position, limit int) (orders []models.Order, more bool, err error) {
	return database.Page[models.Order](s.withLines(s.DB.WithContext(ctx)).Where("user_id = ?", userID), p, limit)
}

// Payment finds one payment of one of the user's orders.
func (s Store) Payment(ctx context.Context, userID, orderID, paymentID string) (models.Payment, error) {
	db := s.DB.WithContext(ctx)
	order, err := OwnOrder(db, userID, orderID)
	if err != nil {
		return models.Payment{}, err
	}
	if err := KnownID(paymentID); err != nil {
		return models.Payment{}, err
	}
	var payment models.Payment
	err = db.Where("id = ? AND order_id = ?", paymentID, order.ID).Take(&payment).Error
	return payment, models.NotFoundAs(err, models.ErrNotFound)
}

// RefundRequests are the order's requests for a refund, oldest first.
func (s Store) RefundRequests(ctx context.Context, orderID string) ([]models.RefundRequest, error) {
	var reqs []models.RefundRequest
	err := s.DB.WithContext(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&reqs).Error
	return reqs, err
}

// OrderFilter narrows the listing of every order; its zero value lists all.
type OrderFilter struct {
	Number int64  // the order's number, 0 for any
	Email  string // its shopper's email, "" for any
	Status string // its status, "" for any
}

var orderStatuses = []string{models.OrderPending, models.OrderPaid, models.OrderPartiallyRefunded, models.OrderRefunded, models.OrderCancelled}

// OrderStatuses are the statuses an order may have, as a filter offers them.
func OrderStatuses() []string { return slices.Clone(orderStatuses) }

// ErrOrderFilter: a search the console cannot read, with the fields at fault.
var ErrOrderFilter = models.Declare(&models.Error{Type: problem.InvalidParameter, Name: "order-filter",
	Message: "q must be an order number or an email, and status one of " + strings.Join(orderStatuses, ", ") + "."})

// ParseOrderFilter reads a search (an order number, "#1042" or "1042", or a
// shopper's email) and a status, or names the fields at fault.
func ParseOrderFilter(q, status string) (OrderFilter, error) {
	var f OrderFilter
	var fields []models.FieldError
	q = strings.TrimSpace(q)
	if n, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && n > 0 {
		f.Number = n
	} else if strings.Contains(q, "@") {
		f.Email = strings.ToLower(q)
	} else if q != "" {
		fields = append(fields, models.FieldError{Field: "q", Message: "must be an order number or an email"})
	}
	if status != "" && !slices.Contains(orderStatuses, status) {
		fields = append(fields, models.FieldError{Field: "status", Message: "must be one of " + strings.Join(orderStatuses, ", ")})
	}
	f.Status = status
	if fields != nil {
		e := *ErrOrderFilter
		e.Fields = fields
		return OrderFilter{}, &e
	}
	return f, nil
}

type OrderOfUser struct {
	models.Order
	Email string
}

// AllOrdersPage is OrdersPage of every user's orders that the filter
// keeps, with their shoppers' emails.
func (s Store) AllOrdersPage(ctx context.Context, f OrderFilter, p *database.Position, limit int) (orders []OrderOfUser, more bool, err error) {
	db := s.withLines(s.DB.WithContext(ctx))
	if f.Number != 0 {
		db = db.Where("number = ?", f.Number)
	}
	if f.Email != "" {
		db = db.Where("user_id IN (?)", s.DB.Model(&models.User{}).Select("id").Where("email = ?", f.Email))
	}
	if f.Status != "" {
		db = db.Where("status = ?", f.Status)
	}
	found, more, err := database.Page[models.Order](db, p, limit)
	if err != nil {
		return nil, false, err
	}
	ids := make([]string, 0, len(found))
	for _, o := range found {
		ids = append(ids, o.UserID)
	}
	emails, err := s.emails(ctx, ids)
	orders = make([]OrderOfUser, 0, len(found))
	for _, o := range found {
		orders = append(orders, OrderOfUser{Order: o, Email: emails[o.UserID]})
	}
	return orders, more, err
}

func (s Store) emails(ctx context.Context, ids []string) (map[string]string, error) {
	var users []models.User
	slices.Sort(ids)
	list := slices.Compact(ids)
	emails := map[string]string{}
	if len(list) == 0 {
		return emails, nil
	}
	err := s.DB.WithContext(ctx).Select("id", "email").Where("id IN ?", list).Find(&users).Error
	for _, u := range users {
		emails[u.ID] = u.Email
	}
	return emails, err
}

// OrderHistory is one order as staff see it: its shopper, every refund, the
// refund requests, its audit trail, and the emails of the users its rows name.
type OrderHistory struct {
	OrderOfUser
	AllRefunds []models.Refund
	Requests   []models.RefundRequest
	Trail      []audit.Entry
	Names      map[string]string
}

// OrderHistory reads any user's order id with everything that happened to it.
func (s Store) OrderHistory(ctx context.Context, id string) (OrderHistory, error) {
	db := s.DB.WithContext(ctx)
	order, err := AnyOrder(s.withLines(db), id)
	if err != nil {
		return OrderHistory{}, err
	}
	h := OrderHistory{OrderOfUser: OrderOfUser{Order: order}}
	if err := db.Where("order_id = ?", id).Order("created_at, id").Find(&h.AllRefunds).Error; err != nil {
		return OrderHistory{}, err
	}
	if h.Requests, err = s.RefundRequests(ctx, id); err != nil {
		return OrderHistory{}, err
	}
	if h.Trail, err = (audit.Trail{DB: s.DB}).History(ctx, id); err != nil {
		return OrderHistory{}, err
	}
	ids := []string{order.UserID}
	for _, r := range h.AllRefunds {
		if r.CreatedBy != nil {
			ids = append(ids, *r.CreatedBy)
		}
	}
	for _, r := range h.Requests {
		if r.DecidedBy != nil {
			ids = append(ids, *r.DecidedBy)
		}
	}
	for _, e := range h.Trail {
		if e.Actor.UserID != nil {
			ids = append(ids, *e.Actor.UserID)
		}
	}
	h.Names, err = s.emails(ctx, ids)
	h.Email = h.Names[order.UserID]
	return h, err
}

// Doubt is a payment attempt or a refund in doubt.
type Doubt struct {
	Kind        string // "payment" or "refund"
	ID          string
	OrderID     string
	OrderNumber int64
	AmountCents int64
	Currency    string
	CreatedAt   time.Time
}

const (
	DoubtPayment = "payment"
	DoubtRefund  = "refund"
)

const maxDoubts = 200 // the most of each kind the staff's list shows

// Doubts lists the payment attempts and refunds in doubt, oldest first.
func (s Store) Doubts(ctx context.Context) ([]Doubt, error) {
	var doubts []Doubt
	for kind, table := range map[string]string{DoubtPayment: "payment_attempts", DoubtRefund: "refunds"} {
		var rows []Doubt
		err := s.DB.WithContext(ctx).Table(table).
			Select(table+".id, "+table+".order_id, orders.number AS order_number, "+table+".amount_cents, "+table+".currency, "+table+".created_at").
			Joins("JOIN orders ON orders.id = "+table+".order_id").
			Where(table+".state = ?", models.InDoubt).Order(table + ".created_at").Limit(maxDoubts).Scan(&rows).Error
		if err != nil {
			return nil, err
		}
		for i := range rows {
			rows[i].Kind = kind
		}
		doubts = append(doubts, rows...)
	}
	slices.SortFunc(doubts, func(a, b Doubt) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return doubts, nil
}
