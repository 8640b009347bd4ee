package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/templates"
)

// The browser's pages. Every render of a form embeds a fresh key in its
// hidden idempotency_key field; the same middleware as the API's makes a
// repeated submission of that form replay its first answer.

// catalogLine is one product of the checkout form, with what was typed.
type catalogLine struct {
	Product  models.Product
	Quantity string
	Error    string
}

type homeView struct {
	layout
	Key         string
	Lines       []catalogLine
	MaxQuantity int
	MaxPending  int
}

func (s *Server) home(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	lines := make([]catalogLine, len(products))
	for i, p := range products {
		lines[i] = catalogLine{Product: p} // empty, not "0": typing 2 must not give 20
	}
	s.renderPage(c, http.StatusOK, "home.html", homeView{layout: s.layout(c), Key: uuid.NewString(), Lines: lines, MaxQuantity: orders.MaxQuantity, MaxPending: s.shop.MaxPending})
}

const qtyPrefix = "qty-"

// checkoutForm reads the checkout form: the items ordered, and the form
// as typed, with a notice when it cannot be ordered as it is.
func (s *Server) checkoutForm(c *gin.Context) (homeView, []orders.ItemInput, error) {
	form := postForm(c)
	view := homeView{layout: s.layout(c), Key: form.Get(middleware.FormKeyField), MaxQuantity: orders.MaxQuantity, MaxPending: s.shop.MaxPending}
	// Through the operation's transaction, as everything an atomic handler
	// reads: it already holds a connection, and must not wait for another.
	products, err := orders.Store{DB: middleware.Tx(c)}.Products(c.Request.Context())
	if err != nil {
		return view, nil, err
	}
	var items []orders.ItemInput
	invalid := false
	for _, p := range products {
		typed := strings.TrimSpace(form.Get(qtyPrefix + p.ID))
		line := catalogLine{Product: p, Quantity: typed}
		quantity, err := strconv.Atoi(typed)
		switch {
		case typed == "": // none of this product
		case err != nil:
			line.Error = "Enter a whole number."
		case quantity < 0 || quantity > orders.MaxQuantity:
			line.Error = "Enter a number from 0 to " + strconv.Itoa(orders.MaxQuantity) + "."
		case quantity == 0: // "0", "00", "+0": none of this product
		default:
			items = append(items, orders.ItemInput{ProductID: p.ID, Quantity: quantity})
		}
		invalid = invalid || line.Error != ""
		view.Lines = append(view.Lines, line)
	}
	switch {
	case unknownProducts(form, products):
		view.Notice = errorNotice("The form lists a product that is no longer in the catalog. Check the quantities and place the order again.")
	case invalid:
		view.Notice = errorNotice("Some quantities are not valid; nothing was ordered.")
	case len(items) == 0:
		view.Notice = errorNotice("Choose a quantity for at least one product.")
	}
	return view, items, nil
}

func unknownProducts(form url.Values, products []models.Product) bool {
	for field := range form {
		id, ok := strings.CutPrefix(field, qtyPrefix)
		if ok && !slices.ContainsFunc(products, func(p models.Product) bool { return p.ID == id }) {
			return true
		}
	}
	return false
}

type ordersView struct {
	layout
	Orders []models.Order
	// Older links to the next page of orders; empty on the last.
	Older string
}

type orderPageView struct {
	layout
	Order       models.Order
	Key         string
	Methods     cardChoice
	MethodError string
	// CancelKey is the Cancel order button's own key.
	CancelKey string
	// The shopper's requests for a refund, and whether the page offers the
	// "Request a refund" form (a charged order, none open), with its key.
	Requests   []models.RefundRequest
	CanRequest bool
	RequestKey string
}

// showOrder is the order's page, with the forms of what the shopper may do.
func (s *Server) showOrder(c *gin.Context, order models.Order) {
	view := orderPageView{layout: s.layout(c), Order: order, Key: uuid.NewString(), Methods: s.cardChoice(), CancelKey: uuid.NewString()}
	if err := s.withRequests(c, &view); err != nil {
		s.fail(c, err)
		return
	}
	view.Notice = orderOutcome(order, view.Requests, s.takeRepeat(c), s.deps.OrderExpiry)
	s.renderPage(c, http.StatusOK, "order.html", view)
}

// orderOutcome is the one place that chooses what the order page opens
// with: the outcome of the order's payments, and whether the form that led
// here was sent more than once (repeated names it, "" when it was not),
// and the answer to the shopper's latest request for a refund.
// Each outcome is one case; expiry is how long an order may wait unpaid.
func orderOutcome(order models.Order, requests []models.RefundRequest, repeated string, expiry time.Duration) *notice {
	twice := repeatedText[repeated]
	last := lastPayment(order)
	refund := lastRefund(order)
	req := latest(requests, func(r models.RefundRequest) time.Time { return r.CreatedAt })
	switch {
	case order.Status == models.OrderCancelled:
		return cancelledNotice(order, expiry, twice)
	case refund != nil:
		return &notice{Kind: noticeSuccess, Title: templates.RefundTitle(order, *refund), Text: "It can take a few days to show on your statement.", Also: twice}
	case req != nil && req.State != models.RequestFulfilled:
		return &notice{Kind: noticeInfo, Title: templates.RequestTitle(*req), Text: templates.RequestAnswer(*req), Also: twice}
	case order.Status == models.OrderPaid && repeated == alreadyPaid:
		return told(noticeInfo, models.ErrOrderPaid.Shopper, "")
	case order.Status == models.OrderPaid:
		return &notice{Kind: noticeSuccess, Title: "Paid.", Text: "Thank you for your order: the payment went through.", Also: twice}
	case order.AwaitingAction() != nil:
		return &notice{Kind: noticeInfo, Title: "Authenticate to pay.", Text: "Your card provider asks you to confirm this payment. Nothing is charged until you do; if you do not, the payment lapses and you can pay again.", Also: twice}
	case order.PaymentInDoubt():
		return &notice{Kind: noticeInfo, Title: "Your last payment is being confirmed.", Text: "We are checking with the card provider whether it went through. You will not be charged twice; this page shows the result once it is known.", Also: twice}
	case lastAttemptFailed(order):
		return &notice{Kind: noticeError, Title: "Your last payment did not go through.", Text: "The card provider never took it, so nothing was charged. Choose a card and pay again.", Also: twice}
	case last != nil && last.Status == models.Declined:
		n := told(noticeError, models.ErrPaymentDeclined.Shopper, twice)
		n.Text = templates.DeclineReason(last.DeclineReason) + n.Text
		return n
	case twice != "":
		return &notice{Kind: noticeInfo, Title: "Sent twice, done once.", Text: twice}
	}
	return nil
}

// What the order page adds when the form that led to it was sent more than
// once: a double-click, the back button, a refresh.
var repeatedText = map[string]string{
	repeatedOrder:   "You sent the order form more than once; one order was placed.",
	repeatedPayment: "You sent the payment form more than once; it was processed once.",
	repeatedCancel:  "Sent twice, done once: you sent the cancel form more than once; it was cancelled once.",
}

// lastAttemptFailed: the order's latest attempt reached no charge — the
// provider refused it, or, past the roll-forward window, had no record of it.
func lastAttemptFailed(order models.Order) bool {
	last := latest(order.Attempts, func(a models.PaymentAttempt) time.Time { return a.CreatedAt })
	return last != nil && last.State == models.Failed
}

func lastPayment(order models.Order) *models.Payment {
	return latest(order.Payments, func(p models.Payment) time.Time { return p.CreatedAt })
}

// latest is the row of rows created last (the later one of a tie), nil
// when there is none.
func latest[T any](rows []T, createdAt func(T) time.Time) *T {
	var last *T
	for i := range rows {
		if last == nil || !createdAt(rows[i]).Before(createdAt(*last)) {
			last = &rows[i]
		}
	}
	return last
}

// paid answers the order page's pay form.
func (s *Server) paid(c *gin.Context, payment models.Payment, err error) {
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Fields != nil && invalid.Fields[0].Field == methodField:
		// The pay form as sent, with its key: nothing was charged nor stored under it.
		s.refusedForm(c, http.StatusUnprocessableEntity, "Nothing was charged: choose a card to pay with, then press Pay.", func(view *orderPageView, sent string) {
			view.Key, view.MethodError = sent, "Choose a card to pay with."
		})
		return
	case errors.Is(err, models.ErrOrderPaid):
		s.markPage(c, orderPage(c.Param("id")), alreadyPaid)
	case err != nil:
		s.fail(c, err)
		return
	}
	if payment.Status == models.RequiresAction {
		// To the card provider's page; it sends the shopper back to the order.
		c.Redirect(http.StatusSeeOther, payment.NextActionURL)
		return
	}
	c.Redirect(http.StatusSeeOther, orderPage(c.Param("id")))
}
