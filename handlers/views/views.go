// Package views is what each page shows: its data, and the sentences that
// tell a shopper or staff an outcome, their activity or an order's history.
package views

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
	"github.com/shop/shop/templates"
)

// Layout is what base.html needs of every page.
type Layout struct {
	Path   string // the current page, marked in the menu
	User   models.User
	Notice *Notice // the outcome the page opens with, under its heading
}

type NoticeKind string

const (
	Success NoticeKind = "success"
	Info    NoticeKind = "info"
	Failure NoticeKind = "error"
)

// Notice is an outcome in a shopper's words; Also, which some add (sent twice).
type Notice struct {
	Kind              NoticeKind
	Title, Text, Also string
}

// Role is "alert" for a problem, read out at once, and "status" otherwise.
func (n Notice) Role() string {
	if n.Kind == Failure {
		return "alert"
	}
	return "status"
}

func Problem(text string) *Notice { return &Notice{Kind: Failure, Text: text} }

// Told is an error's words as a page opens with them.
func Told(kind NoticeKind, words Words, also string) *Notice {
	return &Notice{Kind: kind, Title: words.Heading + ".", Text: words.Text, Also: also}
}

type (
	Link  struct{ Href, Text string }
	Field struct{ Name, Value string }
	// Error is a problem told to a shopper, never with a key, a status or a route.
	Error struct {
		Layout
		Heading   string
		Retry     *RetryForm
		Links     []Link
		RequestID string
	}
	// RetryForm is the failed form with its key: sent again, it runs once.
	RetryForm struct {
		Action, Label string
		Fields        []Field
	}
	// Cards are the pay form's choices: the provider's test cards, and whose.
	Cards struct {
		Provider string
		Cards    []string
	}
	// CatalogLine is one product of the checkout form, with what was typed.
	CatalogLine struct {
		Product         models.Product
		Quantity, Error string
	}
	Home struct {
		Layout
		Key                     string
		Lines                   []CatalogLine
		MaxQuantity, MaxPending int
	}
	Orders struct {
		Layout
		Orders []models.Order
		Older  string // the next page; empty on the last
	}
	// Order is the order's page, with the forms of what the shopper may do.
	Order struct {
		Layout
		Order                       models.Order
		Methods                     Cards
		Key, MethodError, CancelKey string
		Requests                    []models.RefundRequest
		CanRequest                  bool
		RequestKey                  string
	}
	Receipt struct {
		Layout
		Order   models.Order
		Charges []models.Payment // the succeeded payments: a decline is no part of a receipt
	}
	// Credentials is the sign-up or log-in form.
	Credentials struct {
		Layout
		Email, Next string
		Errors      map[string]string
	}
	Password struct {
		Layout
		Key     string
		Changed bool
		Errors  map[string]string
	}
	Authenticate struct {
		Layout
		Auth              payments.Authentication
		Action, ReturnURL string
	}
	Problems struct {
		Layout
		Type             *problem.Type
		Words            Words // how a shopper is told a problem of Type
		All, Final       []problem.Type
		TTL, Lease, Wait time.Duration
	}
)

func (v Problems) IsFinal() bool { return v.Type != nil && slices.Contains(v.Final, *v.Type) }

// lowStock is the most units of which the catalog says how many are left.
const lowStock = 5

// Availability is the line's stock in a shopper's words.
func (l CatalogLine) Availability() string {
	switch n := l.Product.Stock; {
	case n <= 0:
		return "Sold out"
	case n <= lowStock:
		return "Only " + strconv.Itoa(n) + " left"
	}
	return "In stock"
}

func (l CatalogLine) SoldOut() bool { return l.Product.Stock <= 0 }

// OrderPath is an order's page; ConsolePath, the console's page of it.
func OrderPath(id string) string   { return "/orders/" + id }
func ConsolePath(id string) string { return "/staff/orders/" + id }

// The forms a replayed answer names, for the page it leads to; AlreadyPaid,
// a payment form that found its order paid by another tab, its card not charged.
const (
	RepeatedOrder   = "order"
	RepeatedPayment = "payment"
	RepeatedCancel  = "cancel"
	AlreadyPaid     = "already-paid"
)

var repeatedText = map[string]string{
	RepeatedOrder:   "You sent the order form more than once; one order was placed.",
	RepeatedPayment: "You sent the payment form more than once; it was processed once.",
	RepeatedCancel:  "Sent twice, done once: you sent the cancel form more than once; it was cancelled once.",
}

// OrderOutcome is the one place that chooses what the order page opens
// with; repeated names the form repeated to get here, "" for none.
func OrderOutcome(order models.Order, requests []models.RefundRequest, repeated string, expiry time.Duration) *Notice {
	twice := repeatedText[repeated]
	last := latest(order.Payments, func(p models.Payment) time.Time { return p.CreatedAt })
	refund := LastRefund(order)
	req := latest(requests, func(r models.RefundRequest) time.Time { return r.CreatedAt })
	switch {
	case order.Status == models.OrderCancelled:
		return cancelled(order, expiry, twice)
	case refund != nil:
		return &Notice{Kind: Success, Title: templates.RefundTitle(order, *refund), Text: "It can take a few days to show on your statement.", Also: twice}
	case req != nil && req.State != models.RequestFulfilled:
		return &Notice{Kind: Info, Title: templates.RequestTitle(*req), Text: templates.RequestAnswer(*req), Also: twice}
	case order.Status == models.OrderPaid && repeated == AlreadyPaid:
		return Told(Info, WordsOf(models.ErrOrderPaid), "")
	case order.Status == models.OrderPaid:
		return &Notice{Kind: Success, Title: "Paid.", Text: "Thank you for your order: the payment went through.", Also: twice}
	case order.AwaitingAction() != nil:
		return &Notice{Kind: Info, Title: "Authenticate to pay.", Text: "Your card provider asks you to confirm this payment. Nothing is charged until you do; if you do not, the payment lapses and you can pay again.", Also: twice}
	case order.PaymentInDoubt():
		return &Notice{Kind: Info, Title: "Your last payment is being confirmed.", Text: "We are checking with the card provider whether it went through. You will not be charged twice; this page shows the result once it is known.", Also: twice}
	case lastAttemptFailed(order):
		return &Notice{Kind: Failure, Title: "Your last payment did not go through.", Text: "The card provider never took it, so nothing was charged. Choose a card and pay again.", Also: twice}
	case last != nil && last.Status == models.Declined:
		n := Told(Failure, WordsOf(models.ErrPaymentDeclined), twice)
		n.Text = templates.DeclineReason(last.DeclineReason) + n.Text
		return n
	case twice != "":
		return &Notice{Kind: Info, Title: "Sent twice, done once.", Text: twice}
	}
	return nil
}

// lastAttemptFailed: the latest attempt charged nothing (refused, or unknown past the roll-forward window).
func lastAttemptFailed(order models.Order) bool {
	last := latest(order.Attempts, func(a models.PaymentAttempt) time.Time { return a.CreatedAt })
	return last != nil && last.State == models.Failed
}

func LastRefund(o models.Order) *models.Refund {
	return latest(o.Refunds, func(r models.Refund) time.Time { return r.CreatedAt })
}

// latest is the row created last (the later one of a tie), nil for none.
func latest[T any](rows []T, createdAt func(T) time.Time) *T {
	var last *T
	for i := range rows {
		if last == nil || !createdAt(rows[i]).Before(createdAt(*last)) {
			last = &rows[i]
		}
	}
	return last
}

func cancelled(order models.Order, expiry time.Duration, twice string) *Notice {
	title := "You cancelled this order."
	switch order.CancelReason {
	case models.CancelledExpired:
		title = fmt.Sprintf("This order was cancelled because it was not paid within %s; its items went back on the shelf.", spanWords(expiry))
	case models.CancelledByStaff:
		title = "The shop's staff cancelled this order."
	}
	return &Notice{Kind: Success, Title: title, Text: "Nothing was charged. You can place a new order from the catalog.", Also: twice}
}

// spanWords is a duration as a shopper says it: "30 minutes", "1 hour".
func spanWords(d time.Duration) string {
	unit, n := "minute", int64(d/time.Minute)
	switch {
	case d%time.Hour == 0:
		unit, n = "hour", int64(d/time.Hour)
	case d%time.Minute != 0:
		return d.String()
	}
	return count(n, unit)
}

func count(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
