package handlers

import (
	"bytes"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/templates"
)

// layout is what base.html needs of every page.
type layout struct {
	Path string
	User models.User
	// Notice is the outcome the page opens with, right under its heading.
	Notice *notice
}

func (s *Server) layout(c *gin.Context) layout {
	l := layout{User: currentUser(c)}
	if c.Request.Method == http.MethodGet {
		l.Path = c.Request.URL.Path // the current page, marked in the menu
	}
	return l
}

// noticeKind says how a notice looks and how assistive technology hears it.
type noticeKind string

const (
	noticeSuccess noticeKind = "success"
	noticeInfo    noticeKind = "info"
	noticeError   noticeKind = "error"
)

// notice is an outcome in a shopper's words: a short title, what happened
// and what to do next, and Also, a second sentence some outcomes add (the
// form was sent twice).
type notice struct {
	Kind  noticeKind
	Title string
	Text  string
	Also  string
}

// Role is "alert" for a problem, read out at once, and "status" otherwise.
func (n notice) Role() string {
	if n.Kind == noticeError {
		return "alert"
	}
	return "status"
}

func errorNotice(text string) *notice { return &notice{Kind: noticeError, Text: text} }

// told is an error's words as a page opens with them.
func told(kind noticeKind, words models.Words, also string) *notice {
	return &notice{Kind: kind, Title: words.Heading + ".", Text: words.Text, Also: also}
}

// parsePages builds the template cache: each page parsed once with the base
// layout, at start-up, so a broken template stops the server from starting.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templates.FS, "*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		if name == "base.html" {
			continue
		}
		t, err := template.New(name).Funcs(pageFuncs).ParseFS(templates.FS, "base.html", name)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

var pageFuncs = template.FuncMap{
	"money":           money,
	"lineTotal":       func(unit int64, quantity int) int64 { return unit * int64(quantity) },
	"when":            when,
	"day":             day,
	"methodName":      methodName,
	"cardName":        cardName,
	"paymentSentence": paymentSentence,
	"statusName":      statusName,
	"paid":            paid,
	"refundSentence":  refundSentence,
	"requestSentence": requestSentence,
}

// when is a time as the page prints it before the script, when there is
// one, rewrites it in the shopper's own time zone from its datetime.
func when(t time.Time) template.HTML {
	t = t.UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `">` + t.Format("2 Jan 2006 15:04 UTC") + `</time>`)
}

// day is a date alone, for lists that must fit a phone; the script rewrites
// it in the shopper's time zone too.
func day(t time.Time) template.HTML {
	t = t.UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `" data-day>` + t.Format("2 Jan 2006") + `</time>`)
}

// money is an amount in a shopper's words (models.Money).
var money = models.Money

// statusName is an order's status in a shopper's words.
func statusName(status string) string {
	switch status {
	case models.OrderPending:
		return "Awaiting payment"
	case models.OrderPaid:
		return "Paid"
	case models.OrderPartiallyRefunded:
		return "Partly refunded"
	case models.OrderRefunded:
		return "Refunded"
	case models.OrderCancelled:
		return "Cancelled"
	}
	return status
}

// paymentMethod is a choice of the pay form.
type paymentMethod struct{ Value, Label string }

// methodLabels name the test cards the shopper picks from; a method without
// a label of its own is named after its id.
var methodLabels = map[string]string{
	payments.MethodVisa:              "Test Visa card (is charged)",
	payments.MethodMastercard:        "Test Mastercard (is charged)",
	payments.MethodChargeDeclined:    "Test card that is declined",
	payments.MethodInsufficientFunds: "Test card without enough funds",
	payments.MethodDeclined:          "Test card that is declined",
	payments.MethodUnavailable:       "Test card whose provider is down",
	payments.MethodRefundFail:        "Test Visa card (is charged; refunds fail: account closed)",
	payments.MethodAuthentication:    "Test card that asks you to authenticate (3-D Secure)",
}

// cardNames are the test cards as a payment's history names them: the card,
// without what choosing it does.
var cardNames = map[string]string{
	payments.MethodVisa:              "Test Visa card",
	payments.MethodMastercard:        "Test Mastercard",
	payments.MethodChargeDeclined:    "Test declined card",
	payments.MethodInsufficientFunds: "Test card without funds",
	payments.MethodDeclined:          "Test declined card",
	payments.MethodUnavailable:       "Test card of a provider that is down",
	payments.MethodRefundFail:        "Test Visa card",
	payments.MethodAuthentication:    "Test card that asks to authenticate",
}

func cardName(value string) string {
	if name, ok := cardNames[value]; ok {
		return name
	}
	return methodName(value)
}

// paymentSentence is one payment of the order's history, in a shopper's
// words: what happened to how much, on which card, and the bank's reason
// for a decline.
func paymentSentence(p models.Payment) string {
	amount, card := money(p.AmountCents, p.Currency), cardName(p.PaymentMethod)
	if p.Status == models.RequiresAction {
		return amount + " on the " + card + ", waiting for you to authenticate it. Nothing is charged until you do."
	}
	if p.Status != models.Succeeded {
		return amount + " declined on the " + card + ". " + strings.TrimSpace(declineReason(p.DeclineReason)+" Nothing was charged.")
	}
	return amount + " charged to the " + card + "."
}

// paid says whether the order was charged: it has a receipt.
func paid(o models.Order) bool {
	return slices.ContainsFunc(o.Payments, func(p models.Payment) bool { return p.Status == models.Succeeded })
}

func methodName(value string) string {
	if label, ok := methodLabels[value]; ok {
		return label
	}
	return "Test card “" + strings.TrimPrefix(value, "pm_card_") + "”"
}

// cardChoice is the pay form's choices: the provider's own test cards
// (the API accepts the older pm_card_declined too), and whose they are.
type cardChoice struct {
	Provider string
	Cards    []paymentMethod
}

func (s *Server) cardChoice() cardChoice {
	provider, cards := s.payments.TestCards()
	choice := cardChoice{Provider: provider, Cards: make([]paymentMethod, 0, len(cards))}
	for _, m := range cards {
		choice.Cards = append(choice.Cards, paymentMethod{m, methodName(m)})
	}
	return choice
}

// renderPage renders a page into a buffer first, so that a template error
// sends an error page instead of half a page.
func (s *Server) renderPage(c *gin.Context, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "base", data); err != nil {
		s.deps.Logger.ErrorContext(c.Request.Context(), "render page", "page", name, "err", err)
		c.Abort()
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("The page could not be shown; please try again."))
		return
	}
	// Not no-store: the back button should bring back the very page, with
	// the same form key, so that submitting it again replays its answer.
	c.Header("Cache-Control", "private, no-cache")
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

type link struct{ Href, Text string }

// errorView is a problem told to a shopper: what happened, a button that
// sends the same form again when trying again is the answer, and where to
// go next, and the request's id to quote. It never shows a key, a status
// code or a route.
type errorView struct {
	layout
	Heading   string
	Retry     *retryForm
	Links     []link
	RequestID string
}

// retryForm sends the very form that failed again, its key included: the
// key was released, or its first submission is still running, so the
// retry either does the work once or gets the first answer.
type retryForm struct {
	Action string
	Fields []field
	Label  string
}

type field struct{ Name, Value string }

var (
	linkShop   = link{"/", "Back to the catalog"}
	linkOrders = link{"/orders", "My orders"}
)

// explain is an error page in a shopper's words: the error's own, with
// the button that sends the form again when that is the answer, and where
// to go next: back to the order the form was about, or, signed out, to log in.
func explain(c *gin.Context, words models.Words) errorView {
	links := []link{linkOrders, linkShop}
	if id := c.Param("id"); id != "" && strings.HasPrefix(c.FullPath(), "/orders/") {
		links = []link{{orderPage(id), "Back to your order"}, linkOrders}
	}
	if strings.HasPrefix(c.FullPath(), "/staff/") && currentUser(c).IsStaff() {
		links = staffLinks(c)
	}
	if currentUser(c).ID == "" {
		links = []link{{"/login", "Log in"}, {"/signup", "Sign up"}, linkShop}
	}
	view := errorView{Heading: words.Heading, Links: links, RequestID: httpkit.RequestIDOf(c.Request.Context())}
	if words.Retry != "" {
		view.Retry = retryOf(c, words.Retry)
	}
	return view
}

// retryOf is the failed form, to send again as it was; nil unless the
// request was one of the shop's forms with its one-time key.
func retryOf(c *gin.Context, label string) *retryForm {
	if c.Request.Method != http.MethodPost {
		return nil
	}
	form := postForm(c)
	if form.Get(middleware.FormKeyField) == "" {
		return nil
	}
	r := &retryForm{Action: c.Request.URL.Path, Label: label}
	for name, values := range form {
		for _, v := range values {
			r.Fields = append(r.Fields, field{name, v})
		}
	}
	slices.SortStableFunc(r.Fields, func(a, b field) int { return strings.Compare(a.Name, b.Name) })
	return r
}
