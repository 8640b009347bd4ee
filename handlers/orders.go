package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
)

type productJSON struct {
	ID         string `json:"id"`
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
}

type itemJSON struct {
	ProductID      string `json:"product_id"`
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	Quantity       int    `json:"quantity"`
}

type paymentJSON struct {
	ID               string    `json:"id"`
	OrderID          string    `json:"order_id"`
	Status           string    `json:"status"`
	AmountCents      int64     `json:"amount_cents"`
	Currency         string    `json:"currency"`
	ProviderChargeID string    `json:"provider_charge_id"`
	DeclineReason    string    `json:"decline_reason,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
}

type orderJSON struct {
	ID         string        `json:"id"`
	Status     string        `json:"status"`
	Currency   string        `json:"currency"`
	TotalCents int64         `json:"total_cents"`
	Items      []itemJSON    `json:"items"`
	Payments   []paymentJSON `json:"payments"`
	CreatedAt  time.Time     `json:"created_at"`
}

func paymentView(p models.Payment) paymentJSON {
	return paymentJSON{
		ID: p.ID, OrderID: p.OrderID, Status: p.Status, AmountCents: p.AmountCents, Currency: p.Currency,
		ProviderChargeID: p.ProviderChargeID, DeclineReason: p.DeclineReason, CreatedAt: p.CreatedAt.UTC(),
	}
}

func orderView(o models.Order) orderJSON {
	v := orderJSON{
		ID: o.ID, Status: o.Status, Currency: o.Currency, TotalCents: o.TotalCents,
		Items: make([]itemJSON, 0, len(o.Items)), Payments: make([]paymentJSON, 0, len(o.Payments)),
		CreatedAt: o.CreatedAt.UTC(),
	}
	for _, it := range o.Items {
		v.Items = append(v.Items, itemJSON{ProductID: it.ProductID, SKU: it.SKU, Name: it.Name, UnitPriceCents: it.UnitPriceCents, Quantity: it.Quantity})
	}
	for _, p := range o.Payments {
		v.Payments = append(v.Payments, paymentView(p))
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
		out = append(out, productJSON{ID: p.ID, SKU: p.SKU, Name: p.Name, PriceCents: p.PriceCents, Currency: p.Currency})
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
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
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
		s.fail(c, models.Invalid(models.FieldError{Field: "payment_method", Message: "must be one of pm_card_visa, pm_card_declined, pm_card_unavailable"}))
		return
	}
	payment, err := s.pay(c, c.Param("id"), in.PaymentMethod)
	if errors.Is(err, models.ErrOrderPaid) {
		middleware.Final(c)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", paymentLocation(payment))
	if payment.Status == models.PaymentDeclined {
		middleware.Final(c)
		p := problem.PaymentDeclined.With(payment.DeclineReason)
		p.Payment = paymentView(payment)
		s.fail(c, p)
		return
	}
	c.JSON(http.StatusCreated, paymentView(payment))
}

// pay charges one of the user's orders and records the payment, for the API
// and the pay form alike. The provider is called before the transaction
// opens, with the derived key, so a re-run after a crash gets the
// provider's first answer instead of a second charge.
func (s *Server) pay(c *gin.Context, orderID, method string) (models.Payment, error) {
	ctx, ref := c.Request.Context(), middleware.DerivedKey(c)
	now := s.deps.Now().UTC()
	order, err := s.shop.HoldForPayment(ctx, currentUser(c).ID, orderID, ref, now, now.Add(s.deps.Lease))
	if err != nil {
		return models.Payment{}, err
	}
	// The hold lasts as long as this operation's lease, heartbeats included.
	middleware.OnLeaseExtended(c, func(ctx context.Context, until time.Time) error {
		return s.shop.ExtendPaymentHold(ctx, order.ID, ref, until)
	})
	charge, err := s.deps.Provider.Charge(ctx, payments.ChargeRequest{
		IdempotencyKey: ref, AmountCents: order.TotalCents, Currency: order.Currency, PaymentMethod: method,
	})
	s.metrics.provider.WithLabelValues(providerResult(charge, err)).Inc()
	if errors.Is(err, payments.ErrUnavailable) {
		// The provider says nothing was charged: other keys may try at once.
		if releaseErr := s.shop.ReleasePayment(ctx, order.ID, ref); releaseErr != nil {
			s.deps.Logger.Error("release payment hold", "err", releaseErr)
		}
		return models.Payment{}, problem.ProviderUnavailable.With("The payment provider is unavailable; nothing was charged. Retry with the same key.")
	}
	if err != nil {
		// No answer: the charge may have gone through. The hold stays until
		// the lease ends, so only a retry with this key — which the provider
		// recognises — can pay the order meanwhile.
		s.deps.Logger.Warn("payment provider failed", "err", err)
		return models.Payment{}, problem.ProviderUnavailable.With("The payment provider did not confirm the charge. Retry with the same key: the provider recognises the retry, so it never charges twice.")
	}
	s.deps.Faults.afterCharge(ctx)
	return s.shop.RecordPayment(middleware.Tx(c), order, models.Payment{
		Status: charge.Status, AmountCents: order.TotalCents, Currency: order.Currency, PaymentMethod: method,
		DeclineReason: charge.DeclineReason, ProviderChargeID: charge.ID, ProviderKey: ref,
	})
}

func providerResult(charge payments.Charge, err error) string {
	switch {
	case errors.Is(err, payments.ErrUnavailable):
		return "unavailable"
	case err != nil:
		return "error"
	}
	return charge.Status
}
