package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

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

// attemptJSON is one request to the provider: in_doubt until its outcome
// is known, then succeeded, declined or failed (nothing charged).
type attemptJSON struct {
	ID            string    `json:"id"`
	State         string    `json:"state"`
	AmountCents   int64     `json:"amount_cents"`
	Currency      string    `json:"currency"`
	PaymentMethod string    `json:"payment_method"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
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
		ID: o.ID, Number: o.Number, Status: o.Status, Currency: o.Currency, TotalCents: o.TotalCents,
		Items: make([]itemJSON, 0, len(o.Items)), Payments: make([]paymentJSON, 0, len(o.Payments)),
		Attempts:  make([]attemptJSON, 0, len(o.Attempts)),
		CreatedAt: o.CreatedAt.UTC(),
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
		s.fail(c, models.Invalid(models.FieldError{Field: "payment_method", Message: "must be one of " + strings.Join(payments.Methods, ", ")}))
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
// and the pay form alike. The attempt is recorded, with the order's hold,
// before the provider is called with the derived key; so a re-run after a
// crash, or another operation on the order, finds it and asks the provider
// what became of it before anything can be charged again.
func (s *Server) pay(c *gin.Context, orderID, method string) (models.Payment, error) {
	ctx, ref := c.Request.Context(), middleware.DerivedKey(c)
	// A run of this operation that died may have been settled since, by
	// another operation or the reconciler: that payment is its answer.
	if payment, ok, err := s.shop.PaymentOf(ctx, ref); err != nil || ok {
		return payment, err
	}
	// This run holds the order, not the operation: a run that outlived its
	// lease cannot write over the run that took over. The hold lasts as
	// long as the run's lease, heartbeats included.
	holder := ref + "/" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	middleware.OnLeaseExtended(c, func(ctx context.Context, until time.Time) error {
		return s.shop.ExtendPaymentHold(ctx, orderID, holder, until)
	})
	var start models.PaymentStart
	for tries := 0; ; tries++ {
		now := s.deps.Now().UTC()
		var err error
		start, err = s.shop.BeginPayment(ctx, currentUser(c).ID, orderID, ref, holder, method, now, now.Add(s.deps.Lease))
		if errors.Is(err, models.ErrOrderPaid) {
			// Paid meanwhile — perhaps by this operation's own charge,
			// settled by the reconciler since the look above.
			if payment, ok, readErr := s.shop.PaymentOf(ctx, ref); readErr != nil || ok {
				return payment, readErr
			}
		}
		if err != nil {
			return models.Payment{}, err
		}
		if !start.Unresolved {
			break
		}
		if tries == maxResolutions {
			return models.Payment{}, models.ErrPaymentInDoubt
		}
		// An earlier attempt is in doubt: nothing may be charged before
		// the provider says what became of it.
		earlier := start.Attempt
		payment, resolved := s.resolve(ctx, "payment", earlier, holder)
		switch {
		case !resolved:
			s.releaseHold(ctx, orderID, holder)
			if earlier.Operation == ref {
				return models.Payment{}, problem.PaymentUnconfirmed.With(unconfirmed)
			}
			return models.Payment{}, problem.PaymentUnconfirmed.With(models.ErrPaymentInDoubt.Message)
		case earlier.Operation == ref:
			return payment, nil // this operation's own charge, from a run that died
		case payment.Status == models.PaymentSucceeded:
			return models.Payment{}, models.ErrOrderPaid
		}
		// Declined: the order is free to charge.
	}
	attempt := start.Attempt
	charge, err := s.deps.Provider.Charge(ctx, chargeRequest(attempt))
	s.metrics.provider.WithLabelValues(providerResult(charge, err)).Inc()
	if errors.Is(err, payments.ErrUnavailable) {
		// The provider says nothing was charged: other keys may try at once.
		if err := s.shop.FailAttempt(context.WithoutCancel(ctx), attempt, holder); err != nil {
			s.deps.Logger.Error("record a failed payment attempt", "err", err, "attempt", attempt.ID)
		}
		return models.Payment{}, problem.ProviderUnavailable.With("The payment provider is unavailable; nothing was charged. Retry with the same key.")
	}
	if err != nil {
		// No answer: the charge may have gone through. The attempt stays in
		// doubt, so no other key can charge the order before the provider
		// is asked again under this attempt's key: by a retry, another
		// payment of the order, or the reconciler. The hold is let go so
		// that they can do so at once.
		s.deps.Logger.Warn("payment provider failed", "err", err, "attempt", attempt.ID)
		s.releaseHold(ctx, orderID, holder)
		return models.Payment{}, problem.PaymentUnconfirmed.With(unconfirmed)
	}
	payment, err := s.shop.Settle(middleware.Tx(c), attempt, outcomeOf(charge), holder)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// The hold passed while the provider answered: the operation that
		// took it resolved this attempt, with the provider's same answer.
		if settled, ok, readErr := s.shop.PaymentOf(ctx, ref); readErr == nil && ok {
			return settled, nil
		}
	}
	return payment, err
}

// unconfirmed answers an operation whose own charge is in doubt.
const unconfirmed = "The payment provider did not confirm the charge. Retry with the same key: the provider recognises the retry, so it never charges twice."

// maxResolutions bounds how many earlier attempts one payment resolves
// before it gives up; there is at most one in doubt at a time.
const maxResolutions = 3

// releaseHold lets go of the order's hold, whatever became of the request.
func (s *Server) releaseHold(ctx context.Context, orderID, holder string) {
	if err := s.shop.ReleasePayment(context.WithoutCancel(ctx), orderID, holder); err != nil {
		s.deps.Logger.Error("release payment hold", "err", err)
	}
}

func chargeRequest(a models.PaymentAttempt) payments.ChargeRequest {
	return payments.ChargeRequest{
		IdempotencyKey: a.ProviderKey, OrderID: a.OrderID, AmountCents: a.AmountCents, Currency: a.Currency, PaymentMethod: a.PaymentMethod,
	}
}

func outcomeOf(charge payments.Charge) models.Outcome {
	return models.Outcome{Status: charge.Status, ChargeID: charge.ID, DeclineReason: charge.DeclineReason}
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
