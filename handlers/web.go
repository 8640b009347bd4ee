package handlers

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/problem"
)

// The shopper's pages. Every render of a form embeds a fresh key in its
// hidden idempotency_key field: the middleware makes a repeated submission
// of that form replay its first answer.

func (s *Server) home(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.Home{Layout: s.layout(c), Key: uuid.NewString(), MaxQuantity: orders.MaxQuantity, MaxPending: s.shop.MaxPending}
	for _, p := range products {
		view.Lines = append(view.Lines, views.CatalogLine{Product: p}) // empty, not "0": typing 2 must not give 20
	}
	s.renderPage(c, http.StatusOK, "home.html", view)
}

const qtyPrefix = "qty-"

// checkoutForm reads the items ordered, and the form as typed, with a
// notice when it cannot be ordered as it is.
func (s *Server) checkoutForm(c *gin.Context) (views.Home, []orders.ItemInput, error) {
	form := postForm(c)
	view := views.Home{Layout: s.layout(c), Key: form.Get(middleware.FormKeyField), MaxQuantity: orders.MaxQuantity, MaxPending: s.shop.MaxPending}
	// Through the operation's transaction, which already holds a connection.
	products, err := orders.Store{DB: middleware.Tx(c)}.Products(c.Request.Context())
	if err != nil {
		return view, nil, err
	}
	var items []orders.ItemInput
	invalid := false
	for _, p := range products {
		typed := strings.TrimSpace(form.Get(qtyPrefix + p.ID))
		line := views.CatalogLine{Product: p, Quantity: typed}
		quantity, err := strconv.Atoi(typed)
		switch {
		case typed == "":
		case err != nil:
			line.Error = "Enter a whole number."
		case quantity < 0 || quantity > orders.MaxQuantity:
			line.Error = "Enter a number from 0 to " + strconv.Itoa(orders.MaxQuantity) + "."
		case quantity > 0: // "0", "00", "+0": none of this product
			items = append(items, orders.ItemInput{ProductID: p.ID, Quantity: quantity})
		}
		invalid = invalid || line.Error != ""
		view.Lines = append(view.Lines, line)
	}
	switch {
	case unknownProducts(form, products):
		view.Notice = views.Problem("The form lists a product that is no longer in the catalog. Check the quantities and place the order again.")
	case invalid:
		view.Notice = views.Problem("Some quantities are not valid; nothing was ordered.")
	case len(items) == 0:
		view.Notice = views.Problem("Choose a quantity for at least one product.")
	}
	return view, items, nil
}

func unknownProducts(form map[string][]string, products []models.Product) bool {
	for field := range form {
		id, ok := strings.CutPrefix(field, qtyPrefix)
		if ok && !slices.ContainsFunc(products, func(p models.Product) bool { return p.ID == id }) {
			return true
		}
	}
	return false
}

// ordered answers the checkout form: invalid, it comes back (422) with the
// same key, nothing stored; short of stock (409), with what is left, and a
// fresh key for the new order the shopper makes of it.
func (s *Server) ordered(c *gin.Context, form views.Home, order models.Order, err error) {
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Shortages != nil:
		for _, sh := range invalid.Shortages {
			for i, line := range form.Lines {
				if line.Product.ID == sh.ProductID {
					form.Lines[i].Product.Stock = sh.Left
					form.Lines[i].Error = "Only " + strconv.Itoa(sh.Left) + " left: you asked for " + strconv.Itoa(sh.Asked) + "."
					if sh.Left == 0 {
						form.Lines[i].Error = "Sold out: none left."
					}
				}
			}
		}
		form.Key = uuid.NewString()
		form.Notice = views.Problem(models.ErrOutOfStock.Shopper.Text)
		s.renderPage(c, http.StatusConflict, "home.html", form)
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		// The catalog changed under the form: the details are the API's words.
		form.Notice = views.Problem("The order could not be placed as it is; nothing was ordered. Check the quantities and place the order again.")
		s.renderPage(c, http.StatusUnprocessableEntity, "home.html", form)
	case err != nil:
		s.fail(c, err)
	default:
		c.Redirect(http.StatusSeeOther, views.OrderPath(order.ID))
	}
}

func (s *Server) showOrder(c *gin.Context, order models.Order) {
	reqs, err := s.shop.RefundRequests(c.Request.Context(), order.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.Order{Layout: s.layout(c), Order: order, Key: uuid.NewString(), Methods: s.cards(), CancelKey: uuid.NewString(),
		Requests: reqs, RequestKey: uuid.NewString()}
	view.CanRequest = order.Charged() && order.Status != models.OrderRefunded &&
		!slices.ContainsFunc(reqs, func(r models.RefundRequest) bool { return r.State == models.RequestOpen })
	view.Notice = views.OrderOutcome(order, reqs, s.takeRepeat(c), s.deps.OrderExpiry)
	s.renderPage(c, http.StatusOK, "order.html", view)
}

// paid answers the pay form: the order page, which tells the outcome, or
// the card provider's page to authenticate.
func (s *Server) paid(c *gin.Context, payment models.Payment, err error) {
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Fields != nil && invalid.Fields[0].Field == methodField:
		// The pay form as sent, with its key: nothing was charged nor stored under it.
		s.refusedForm(c, http.StatusUnprocessableEntity, "Nothing was charged: choose a card to pay with, then press Pay.", func(view *views.Order, sent string) {
			view.Key, view.MethodError = sent, "Choose a card to pay with."
		})
		return
	case errors.Is(err, models.ErrOrderPaid):
		s.markPage(c, views.OrderPath(c.Param("id")), views.AlreadyPaid)
	case err != nil:
		s.fail(c, err)
		return
	}
	if payment.Status == models.RequiresAction {
		c.Redirect(http.StatusSeeOther, payment.NextActionURL)
		return
	}
	c.Redirect(http.StatusSeeOther, views.OrderPath(c.Param("id")))
}

// refusedByOrder shows the order page again with the refused cancel form:
// with its key when nothing was stored under it, a fresh one after a final
// answer, which was.
func (s *Server) refusedByOrder(c *gin.Context, err error) {
	p, words, final := s.answerOf(c, err)
	s.refusedForm(c, p.Status, words.Text, func(view *views.Order, sent string) {
		view.Key, view.CancelKey = uuid.NewString(), sent
		if final {
			view.CancelKey = uuid.NewString()
		}
	})
}

// refusedForm shows the order page again with a refused form (keep sets
// its keys from the key sent), and why.
func (s *Server) refusedForm(c *gin.Context, status int, text string, keep func(view *views.Order, sent string)) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.Order{Layout: s.layout(c), Order: order, Methods: s.cards()}
	keep(&view, postForm(c).Get(middleware.FormKeyField))
	view.Notice = views.Problem(text)
	s.renderPage(c, status, "order.html", view)
}

// receiptPage is a paid order's receipt, made to be printed.
func (s *Server) receiptPage(c *gin.Context) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.Receipt{Layout: s.layout(c), Order: order}
	for _, p := range order.Payments {
		if p.Status == models.Succeeded {
			view.Charges = append(view.Charges, p)
		}
	}
	if len(view.Charges) == 0 {
		s.fail(c, problem.NotFound.With("This order has no receipt yet: it is not paid."))
		return
	}
	s.renderPage(c, http.StatusOK, "receipt.html", view)
}
