package handlers

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// The shopper's operations on orders, each one handler for the API and the
// browser: one decode, one service call, then JSON or a page.

type productJSON struct {
	ID         string `json:"id"`
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
	Stock      int    `json:"stock"` // what a shopper can buy: more is refused, out-of-stock
}

func orderLocation(id string) string { return apiPrefix + "/orders/" + id }

func (s *Server) listProducts(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	s.reply(c, err, http.StatusOK, gin.H{"products": each(products, func(p models.Product) productJSON {
		return productJSON{ID: p.ID, SKU: p.SKU, Name: p.Name, PriceCents: p.PriceCents, Currency: p.Currency, Stock: p.Stock}
	})})
}

// createOrder places one order: the API's items, or the checkout form's
// quantities, which an invalid form gets back (422) with the same key.
func (s *Server) createOrder(c *gin.Context) {
	var in struct {
		Items []orders.ItemInput `json:"items"`
	}
	var form views.Home
	var err error
	if isPage(c) {
		form, in.Items, err = s.checkoutForm(c)
	} else {
		err = decode(c, &in)
	}
	switch {
	case err != nil:
		s.fail(c, err)
		return
	case form.Notice != nil:
		s.renderPage(c, http.StatusUnprocessableEntity, "home.html", form)
		return
	}
	order, err := s.shop.CreateOrder(middleware.Tx(c), currentUser(c).ID, middleware.DerivedKey(c), in.Items)
	switch {
	case isPage(c):
		s.ordered(c, form, order, err)
	case err != nil:
		s.fail(c, err)
	default:
		c.Header("Location", orderLocation(order.ID))
		c.JSON(http.StatusCreated, models.ViewOrder(order))
	}
}

func (s *Server) getOrder(c *gin.Context) {
	order, err := s.payments.Awaited(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		s.showOrder(c, order)
	default:
		c.JSON(http.StatusOK, models.ViewOrder(order))
	}
}

// listOrders is the user's orders, newest first, a page at a time.
func (s *Server) listOrders(c *gin.Context) {
	list, next, limit, err := readPage(c, isUUID, func(from *database.Position, limit int) ([]models.Order, bool, error) {
		return s.shop.OrdersPage(c.Request.Context(), currentUser(c).ID, from, limit)
	}, func(o models.Order) cursor { return cursor{o.CreatedAt, o.ID} })
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		view := views.Orders{Layout: s.layout(c), Orders: list, Older: nextURL(c, next, limit)}
		s.renderPage(c, http.StatusOK, "orders.html", view)
	default:
		c.JSON(http.StatusOK, pageJSON(c, "orders", list, models.ViewOrder, next, limit))
	}
}

// cancelOrder cancels a pending order; the page of a paid one says why not.
func (s *Server) cancelOrder(c *gin.Context) {
	if err := decodeNone(c); err != nil {
		s.fail(c, err)
		return
	}
	order, err := s.payments.Cancel(middleware.Tx(c), currentUser(c).ID, c.Param("id"))
	switch {
	case isPage(c) && errors.Is(err, models.ErrPaidNotCancellable):
		s.refusedByOrder(c, err)
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		c.Redirect(http.StatusSeeOther, views.OrderPath(c.Param("id")))
	default:
		c.JSON(http.StatusOK, models.ViewOrder(order))
	}
}

const methodField = "payment_method"

// createPayment charges the order in the path with the method sent.
func (s *Server) createPayment(c *gin.Context) {
	var in struct {
		PaymentMethod string `json:"payment_method" form:"payment_method"`
	}
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	var payment models.Payment
	err := error(models.Invalid(models.FieldError{Field: methodField, Message: "must be one of " + strings.Join(payments.Methods, ", ")}))
	if slices.Contains(payments.Methods, in.PaymentMethod) { // the method's one check, for the API and the form
		payment, err = s.payments.Pay(c.Request.Context(), operationOf(c), currentUser(c).ID, c.Param("id"), in.PaymentMethod)
	}
	if isPage(c) {
		s.paid(c, payment, err)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", orderLocation(payment.OrderID)+"/payments/"+payment.ID) // of a 402 too
	switch payment.Status {
	case models.Declined:
		s.fail(c, models.DeclinedError(payment))
	case models.RequiresAction:
		v := models.ViewPayment(payment)
		v.NextAction = &models.NextActionJSON{Type: "redirect_to_url", RedirectToURL: models.RedirectToURL{URL: payment.NextActionURL, ReturnURL: s.payments.ReturnURL(payment.OrderID)}}
		c.JSON(http.StatusAccepted, v)
	default:
		c.JSON(http.StatusCreated, models.ViewPayment(payment))
	}
}

// operationOf is the operation a payment or refund runs in: the
// middleware's own, so that the service never calls back into a handler.
func operationOf(c *gin.Context) billing.Operation {
	op := middleware.Current(c)
	return billing.Operation{DerivedKey: op.DerivedKey(), Holder: op.Holder(), Tx: op.Tx}
}

func (s *Server) getPayment(c *gin.Context) {
	payment, err := s.shop.Payment(c.Request.Context(), currentUser(c).ID, c.Param("id"), c.Param("payment_id"))
	s.reply(c, err, http.StatusOK, models.ViewPayment(payment))
}
