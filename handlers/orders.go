package handlers

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

type productJSON struct {
	ID         string `json:"id"`
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
	// Stock is what a shopper can buy: an order of more is refused, out-of-stock.
	Stock int `json:"stock"`
}

func orderLocation(id string) string { return "/api/v1/orders/" + id }

func (s *Server) listProducts(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]productJSON, 0, len(products))
	for _, p := range products {
		out = append(out, productJSON{ID: p.ID, SKU: p.SKU, Name: p.Name, PriceCents: p.PriceCents, Currency: p.Currency, Stock: p.Stock})
	}
	c.JSON(http.StatusOK, gin.H{"products": out})
}

func (s *Server) createOrder(c *gin.Context) {
	var in struct {
		Items []orders.ItemInput `json:"items"`
	}
	if err := decodeJSON(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	order, err := s.shop.CreateOrder(middleware.Tx(c), currentUser(c).ID, middleware.DerivedKey(c), in.Items)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", orderLocation(order.ID))
	c.JSON(http.StatusCreated, models.ViewOrder(order))
}

func (s *Server) getOrder(c *gin.Context) {
	order, err := s.payments.Awaited(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, models.ViewOrder(order))
}

// createPayment charges the order.
func (s *Server) createPayment(c *gin.Context) {
	var in struct {
		PaymentMethod string `json:"payment_method"`
	}
	if err := decodeJSON(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	payment, err := s.pay(c, in.PaymentMethod)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", paymentLocation(payment))
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

// pay charges the order in the path with the method sent, for the API and
// the order page's form alike: the one check of the method, the one call.
func (s *Server) pay(c *gin.Context, method string) (models.Payment, error) {
	if !slices.Contains(payments.Methods, method) {
		return models.Payment{}, models.Invalid(models.FieldError{Field: methodField, Message: "must be one of " + strings.Join(payments.Methods, ", ")})
	}
	return s.payments.Pay(c.Request.Context(), operationOf(c), currentUser(c).ID, c.Param("id"), method)
}

const methodField = "payment_method"

// operationOf is the idempotent operation a payment or refund runs in: the
// middleware's own, so that the service calls the middleware, never back
// into a handler.
func operationOf(c *gin.Context) billing.Operation {
	op := middleware.Current(c)
	return billing.Operation{DerivedKey: op.DerivedKey(), Tx: op.Tx, OnLeaseExtended: op.OnLeaseExtended}
}

// paymentLocation is where a payment is served, the Location of its 201
// (and of a declined payment's 402).
func paymentLocation(p models.Payment) string {
	return orderLocation(p.OrderID) + "/payments/" + p.ID
}

// getPayment answers one payment of one of the user's orders.
func (s *Server) getPayment(c *gin.Context) {
	payment, err := s.shop.Payment(c.Request.Context(), currentUser(c).ID, c.Param("id"), c.Param("payment_id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, models.ViewPayment(payment))
}
