package models

// The staff's reads: every user's orders, one order's whole history, and
// the requests in doubt. The console's pages and the staff API share them.

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/problem"
)

// OrderFilter narrows the listing of every order; its zero value lists all.
type OrderFilter struct {
	Number int64  // the order's number, 0 for any
	Email  string // its shopper's email, "" for any
	Status string // its status, "" for any
}

// orderStatuses are the statuses an order may have, as a filter names them.
var orderStatuses = []string{OrderPending, OrderPaid, OrderPartiallyRefunded, OrderRefunded, OrderCancelled}

// OrderStatuses are the statuses an order may have, in the order a filter
// offers them: a copy, for the console's choices.
func OrderStatuses() []string { return slices.Clone(orderStatuses) }

// ParseOrderFilter reads a search (an order number, "#1042" or "1042", or a
// shopper's email) and a status: an invalid-parameter error naming the
// fields at fault otherwise.
func ParseOrderFilter(q, status string) (OrderFilter, error) {
	var f OrderFilter
	var fields []FieldError
	q = strings.TrimSpace(q)
	if n, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && n > 0 {
		f.Number = n
	} else if strings.Contains(q, "@") {
		f.Email = strings.ToLower(q)
	} else if q != "" {
		fields = append(fields, FieldError{"q", "must be an order number or an email"})
	}
	if status != "" && !slices.Contains(orderStatuses, status) {
		fields = append(fields, FieldError{"status", "must be one of " + strings.Join(orderStatuses, ", ")})
	}
	f.Status = status
	if fields != nil {
		return OrderFilter{}, &Error{Type: problem.InvalidParameter, Fields: fields,
			Message: "q must be an order number or an email, and status one of " + strings.Join(orderStatuses, ", ") + ".",
			Shopper: Words{Heading: "Nothing to find", Text: "Search by an order number (such as 1042) or a shopper's email, and pick a status from the list."}}
	}
	return f, nil
}

// OrderOfUser is an order with its shopper's email.
type OrderOfUser struct {
	Order
	Email string
}

// AllOrdersPage lists up to limit of every user's orders that the filter
// keeps, newest first, with their lines and their shoppers' emails, from
// after p; more says whether any follow.
func (s Shop) AllOrdersPage(ctx context.Context, f OrderFilter, p *Position, limit int) (orders []OrderOfUser, more bool, err error) {
	db := after(s.withLines(s.DB.WithContext(ctx)), p)
	if f.Number != 0 {
		db = db.Where("number = ?", f.Number)
	}
	if f.Email != "" {
		db = db.Where("user_id IN (?)", s.DB.Model(&User{}).Select("id").Where("email = ?", f.Email))
	}
	if f.Status != "" {
		db = db.Where("status = ?", f.Status)
	}
	var found []Order
	if err := db.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&found).Error; err != nil {
		return nil, false, err
	}
	if more = len(found) > limit; more {
		found = found[:limit]
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

// emails are the emails of the users with the ids, by id.
func (s Shop) emails(ctx context.Context, ids []string) (map[string]string, error) {
	var users []User
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

// OrderHistory is one order as staff see it: its shopper, every attempt
// and refund whatever their state, the shopper's requests, and the emails
// of the users its rows name (who gave a refund, who declined a request).
type OrderHistory struct {
	OrderOfUser
	AllRefunds []Refund
	Requests   []RefundRequest
	// Trail is the order's audit trail, oldest first: who did what.
	Trail []Entry
	Names map[string]string
}

// OrderHistory reads any user's order id with everything that happened to it.
func (s Shop) OrderHistory(ctx context.Context, id string) (OrderHistory, error) {
	db := s.DB.WithContext(ctx)
	order, err := anyOrder(s.withLines(db), id)
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
	if h.Trail, err = s.History(ctx, id); err != nil {
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

// Doubt is a request sent to the provider whose outcome the shop does not
// know: a payment attempt or a refund in doubt.
type Doubt struct {
	Kind        string // "payment" or "refund"
	ID          string
	OrderID     string
	OrderNumber int64
	AmountCents int64
	Currency    string
	CreatedAt   time.Time
}

// Kinds of a Doubt.
const (
	DoubtPayment = "payment"
	DoubtRefund  = "refund"
)

// maxDoubts is the most requests in doubt the staff's list shows.
const maxDoubts = 200

// Doubts lists the payment attempts and refunds in doubt, oldest first.
func (s Shop) Doubts(ctx context.Context) ([]Doubt, error) {
	var doubts []Doubt
	for kind, table := range map[string]string{DoubtPayment: "payment_attempts", DoubtRefund: "refunds"} {
		var rows []Doubt
		err := s.DB.WithContext(ctx).Table(table).
			Select(table+".id, "+table+".order_id, orders.number AS order_number, "+table+".amount_cents, "+table+".currency, "+table+".created_at").
			Joins("JOIN orders ON orders.id = "+table+".order_id").
			Where(table+".state = ?", InDoubt).Order(table + ".created_at").Limit(maxDoubts).Scan(&rows).Error
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
