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

// NoticeKind says how a notice looks and how assistive technology hears it.
type NoticeKind string

const (
	Success NoticeKind = "success"
	Info    NoticeKind = "info"
	Failure NoticeKind = "error"
)

// Notice is an outcome in a shopper's words: a short title, what happened
// and what to do next, and Also, which some outcomes add (sent twice).
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

// Problem is a notice of what went wrong.
func Problem(text string) *Notice { return &Notice{Kind: Failure, Text: text} }

// Told is an error's words as a page opens with them.
func Told(kind NoticeKind, words models.Words, also string) *Notice {
	return &Notice{Kind: kind, Title: words.Heading + ".", Text: words.Text, Also: also}
}

type Link struct{ Href, Text string }

// Error is a problem told to a shopper: what happened, a button that sends
// the same form again when that is the answer, where to go next, and the
// request's id to quote; never a key, a status code or a route.
type Error struct {
	Layout
	Heading   string
	Retry     *RetryForm
	Links     []Link
	RequestID string
}

// RetryForm is the very form that failed, its key included: the key was
// released or its first submission still runs, so a retry does the work
// once or gets the first answer.
type RetryForm struct {
	Action, Label string
	Fields        []Field
}

type Field struct{ Name, Value string }

// Cards are the pay form's choices: the provider's test cards, and whose.
type Cards struct {
	Provider string
	Cards    []string
}

// CatalogLine is one product of the checkout form, with what was typed.
type CatalogLine struct {
	Product  models.Product
	Quantity string
	Error    string
}

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

// SoldOut reports a product that cannot be ordered until it is restocked.
func (l CatalogLine) SoldOut() bool { return l.Product.Stock <= 0 }

type Home struct {
	Layout
	Key                     string
	Lines                   []CatalogLine
	MaxQuantity, MaxPending int
}

type Orders struct {
	Layout
	Orders []models.Order
	Older  string // the next page of orders; empty on the last
}

type Order struct {
	Layout
	Order       models.Order
	Key         string
	Methods     Cards
	MethodError string
	CancelKey   string
	// The shopper's requests for a refund, and whether the page offers the
	// form to ask for one (a charged order, none open), with its key.
	Requests   []models.RefundRequest
	CanRequest bool
	RequestKey string
}

type Receipt struct {
	Layout
	Order   models.Order
	Charges []models.Payment // the succeeded payments: a decline is no part of a receipt
}

// Credentials is the sign-up or log-in form.
type Credentials struct {
	Layout
	Email, Next string
	Errors      map[string]string
}

type Password struct {
	Layout
	Key     string
	Changed bool
	Errors  map[string]string
}

type Authenticate struct {
	Layout
	Auth              payments.Authentication
	Action, ReturnURL string
}

type Problems struct {
	Layout
	Type             *problem.Type
	Error            *models.Error // declared for Type: how a shopper is told it
	All, Final       []problem.Type
	TTL, Lease, Wait time.Duration
}

// IsFinal says whether the page's type is a final answer.
func (v Problems) IsFinal() bool { return v.Type != nil && slices.Contains(v.Final, *v.Type) }

// OrderPath is an order's page; ConsolePath, the console's page of it.
func OrderPath(id string) string { return "/orders/" + id }

func ConsolePath(id string) string { return "/staff/orders/" + id }
