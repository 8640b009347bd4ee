package handlers

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

type productJSON struct {
	ID         string `json:"id"`
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
	// Stock is the units on hand: an order of more is refused, out-of-stock.
	Stock int `json:"stock"`
}

type itemJSON struct {
	ProductID      string `json:"product_id"`
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	Quantity       int    `json:"quantity"`
}

type paymentJSON struct {
	ID               string               `json:"id"`
	OrderID          string               `json:"order_id"`
	Status           models.PaymentStatus `json:"status"`
	AmountCents      int64                `json:"amount_cents"`
	Currency         string               `json:"currency"`
	ProviderChargeID string               `json:"provider_charge_id"`
	DeclineReason    string               `json:"decline_reason,omitempty"`
	// NextAction is what a payment that requires action asks of the
	// shopper, shaped as Stripe's PaymentIntent next_action.
	NextAction *nextActionJSON `json:"next_action,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
}

type nextActionJSON struct {
	Type          string        `json:"type"`
	RedirectToURL redirectToURL `json:"redirect_to_url"`
}

type redirectToURL struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url"`
}

// attemptJSON is one request to the provider: in_doubt until its outcome
// is known, requires_action while it waits for the shopper to
// authenticate, then succeeded, declined or failed (nothing charged).
type attemptJSON struct {
	ID            string       `json:"id"`
	State         models.State `json:"state"`
	AmountCents   int64        `json:"amount_cents"`
	Currency      string       `json:"currency"`
	PaymentMethod string       `json:"payment_method"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

type orderJSON struct {
	ID         string        `json:"id"`
	Number     int64         `json:"number"`
	Status     string        `json:"status"`
	Currency   string        `json:"currency"`
	TotalCents int64         `json:"total_cents"`
	Items      []itemJSON    `json:"items"`
	Payments   []paymentJSON `json:"payments"`
	Attempts   []attemptJSON `json:"attempts"`
	// RefundedCents is what succeeded and pending refunds give back.
	RefundedCents int64        `json:"refunded_cents"`
	Refunds       []refundJSON `json:"refunds"`
	// CancelReason says why a cancelled order was: shopper or expired.
	CancelReason string    `json:"cancel_reason,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

func paymentView(p models.Payment) paymentJSON {
	return paymentJSON{
		ID: p.ID, OrderID: p.OrderID, Status: p.Status, AmountCents: p.AmountCents, Currency: p.Currency,
		ProviderChargeID: p.ProviderChargeID, DeclineReason: p.DeclineReason, CreatedAt: p.CreatedAt.UTC(),
	}
}

func orderView(o models.Order) orderJSON {
	v := orderJSON{
		ID: o.ID, Number: o.Number, Status: o.Status, Currency: o.Currency, TotalCents: o.TotalCents,
		Items: make([]itemJSON, 0, len(o.Items)), Payments: make([]paymentJSON, 0, len(o.Payments)),
		Attempts:      make([]attemptJSON, 0, len(o.Attempts)),
		RefundedCents: o.RefundedCents, Refunds: make([]refundJSON, 0, len(o.Refunds)),
		CancelReason: o.CancelReason, CreatedAt: o.CreatedAt.UTC(),
	}
	for _, r := range o.Refunds {
		v.Refunds = append(v.Refunds, refundView(r))
	}
	for _, it := range o.Items {
		v.Items = append(v.Items, itemJSON{ProductID: it.ProductID, SKU: it.SKU, Name: it.Name, UnitPriceCents: it.UnitPriceCents, Quantity: it.Quantity})
	}
	for _, p := range o.Payments {
		v.Payments = append(v.Payments, paymentView(p))
	}
	for _, a := range o.Attempts {
		v.Attempts = append(v.Attempts, attemptJSON{
			ID: a.ID, State: a.State, AmountCents: a.AmountCents, Currency: a.Currency,
			PaymentMethod: a.PaymentMethod, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(),
		})
	}
	return v
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
		Items []models.ItemInput `json:"items"`
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
	c.JSON(http.StatusCreated, orderView(order))
}

func (s *Server) getOrder(c *gin.Context) {
	order, err := s.payments.Awaited(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, orderView(order))
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
	if !slices.Contains(payments.Methods, in.PaymentMethod) {
		s.fail(c, models.Invalid(models.FieldError{Field: "payment_method", Message: "must be one of " + strings.Join(payments.Methods, ", ")}))
		return
	}
	payment, err := s.payments.Pay(c.Request.Context(), operationOf(c), currentUser(c).ID, c.Param("id"), in.PaymentMethod)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", paymentLocation(payment))
	switch payment.Status {
	case models.PaymentDeclined:
		s.fail(c, models.DeclinedError(payment))
	case models.PaymentRequiresAction:
		v := paymentView(payment)
		v.NextAction = &nextActionJSON{Type: "redirect_to_url", RedirectToURL: redirectToURL{URL: payment.NextActionURL, ReturnURL: s.payments.ReturnURL(payment.OrderID)}}
		c.JSON(http.StatusAccepted, v)
	default:
		c.JSON(http.StatusCreated, paymentView(payment))
	}
}

// operationOf is the idempotent operation a payment or refund runs in: the
// middleware's own, so that the service calls the middleware, never back
// into a handler.
func operationOf(c *gin.Context) billing.Operation {
	op := middleware.Current(c)
	return billing.Operation{DerivedKey: op.DerivedKey(), Tx: op.Tx, OnLeaseExtended: op.OnLeaseExtended}
}
