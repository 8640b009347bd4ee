// Package views is what each page shows: its data, and the sentences that
// tell a shopper or staff an outcome, their activity or an order's history.
package views

import (
	"slices"
	"strconv"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
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
func Told(kind NoticeKind, words models.Words, also string) *Notice {
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
	// RetryForm is the form that failed, its key included: sent again, it
	// does the work once or gets the first answer.
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
		Error            *models.Error // declared for Type: how a shopper is told it
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
