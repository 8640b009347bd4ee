package models

import (
	"fmt"
	"time"
)

// The order as the API's answers and the outbox's events show it.

type ItemJSON struct {
	ProductID      string `json:"product_id"`
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	Quantity       int    `json:"quantity"`
}

type PaymentJSON struct {
	ID               string `json:"id"`
	OrderID          string `json:"order_id"`
	Status           State  `json:"status"`
	AmountCents      int64  `json:"amount_cents"`
	Currency         string `json:"currency"`
	ProviderChargeID string `json:"provider_charge_id"`
	DeclineReason    string `json:"decline_reason,omitempty"`
	// NextAction is what a payment that requires action asks of the
	// shopper, as Stripe's PaymentIntent next_action.
	NextAction *NextActionJSON `json:"next_action,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
}

// NextActionJSON is where a shopper authenticates a payment, and comes back.
type NextActionJSON struct {
	Type          string        `json:"type"`
	RedirectToURL RedirectToURL `json:"redirect_to_url"`
}

// RedirectToURL is Stripe's redirect_to_url next action.
type RedirectToURL struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url"`
}

// AttemptJSON is one charge request to the provider, in any State.
type AttemptJSON struct {
	ID            string    `json:"id"`
	State         State     `json:"state"`
	AmountCents   int64     `json:"amount_cents"`
	Currency      string    `json:"currency"`
	PaymentMethod string    `json:"payment_method"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// RefundJSON is one refund that gives money back: succeeded, or pending.
type RefundJSON struct {
	ID          string    `json:"id"`
	OrderID     string    `json:"order_id"`
	PaymentID   string    `json:"payment_id"`
	Status      State     `json:"status"`
	AmountCents int64     `json:"amount_cents"`
	Currency    string    `json:"currency"`
	Reason      string    `json:"reason"`
	CreatedBy   *string   `json:"created_by"` // the staff user; null before it was recorded
	CreatedAt   time.Time `json:"created_at"`
}

type OrderJSON struct {
	ID            string        `json:"id"`
	Number        int64         `json:"number"`
	Status        string        `json:"status"`
	Currency      string        `json:"currency"`
	TotalCents    int64         `json:"total_cents"`
	Items         []ItemJSON    `json:"items"`
	Payments      []PaymentJSON `json:"payments"`
	Attempts      []AttemptJSON `json:"attempts"`
	RefundedCents int64         `json:"refunded_cents"` // what succeeded and pending refunds give back
	Refunds       []RefundJSON  `json:"refunds"`
	CancelReason  string        `json:"cancel_reason,omitempty"`
	CreatedAt     time.Time     `json:"created_at"`
}

func ViewPayment(p Payment) PaymentJSON {
	return PaymentJSON{ID: p.ID, OrderID: p.OrderID, Status: p.Status, AmountCents: p.AmountCents, Currency: p.Currency,
		ProviderChargeID: p.ProviderChargeID, DeclineReason: p.DeclineReason, CreatedAt: p.CreatedAt.UTC()}
}

func ViewRefund(r Refund) RefundJSON {
	return RefundJSON{ID: r.ID, OrderID: r.OrderID, PaymentID: r.PaymentID, Status: r.State, AmountCents: r.AmountCents,
		Currency: r.Currency, Reason: r.Reason, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC()}
}

// ViewOrder is the order with the lines it was read with.
func ViewOrder(o Order) OrderJSON {
	return OrderJSON{
		ID: o.ID, Number: o.Number, Status: o.Status, Currency: o.Currency, TotalCents: o.TotalCents,
		Items: views(o.Items, func(it OrderItem) ItemJSON {
			return ItemJSON{ProductID: it.ProductID, SKU: it.SKU, Name: it.Name, UnitPriceCents: it.UnitPriceCents, Quantity: it.Quantity}
		}),
		Payments: views(o.Payments, ViewPayment),
		Attempts: views(o.Attempts, func(a PaymentAttempt) AttemptJSON {
			return AttemptJSON{ID: a.ID, State: a.State, AmountCents: a.AmountCents, Currency: a.Currency,
				PaymentMethod: a.PaymentMethod, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC()}
		}),
		RefundedCents: o.RefundedCents, Refunds: views(o.Refunds, ViewRefund),
		CancelReason: o.CancelReason, CreatedAt: o.CreatedAt.UTC(),
	}
}

// views is each row's view: an empty list, not null, for none.
func views[T, V any](rows []T, view func(T) V) []V {
	out := make([]V, 0, len(rows))
	for _, r := range rows {
		out = append(out, view(r))
	}
	return out
}

// Money is an amount in a shopper's words: $12.50, or 12.50 EUR.
func Money(cents int64, currency string) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	amount := fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
	if currency == "USD" {
		return "$" + amount
	}
	return amount + " " + currency
}
