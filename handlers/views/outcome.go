package views

import (
	"fmt"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/templates"
)

// The forms a replayed answer names, for the page it leads to; AlreadyPaid,
// a payment form that found its order paid by another tab, its card not charged.
const (
	RepeatedOrder   = "order"
	RepeatedPayment = "payment"
	RepeatedCancel  = "cancel"
	AlreadyPaid     = "already-paid"
)

var repeatedText = map[string]string{
	RepeatedOrder:   "You sent the order form more than once; one order was placed.",
	RepeatedPayment: "You sent the payment form more than once; it was processed once.",
	RepeatedCancel:  "Sent twice, done once: you sent the cancel form more than once; it was cancelled once.",
}

// OrderOutcome is the one place that chooses what the order page opens
// with: its payments', refunds' or latest request's outcome, and whether the
// form that led here was repeated ("" when not).
func OrderOutcome(order models.Order, requests []models.RefundRequest, repeated string, expiry time.Duration) *Notice {
	twice := repeatedText[repeated]
	last := latest(order.Payments, func(p models.Payment) time.Time { return p.CreatedAt })
	refund := LastRefund(order)
	req := latest(requests, func(r models.RefundRequest) time.Time { return r.CreatedAt })
	switch {
	case order.Status == models.OrderCancelled:
		return cancelled(order, expiry, twice)
	case refund != nil:
		return &Notice{Kind: Success, Title: templates.RefundTitle(order, *refund), Text: "It can take a few days to show on your statement.", Also: twice}
	case req != nil && req.State != models.RequestFulfilled:
		return &Notice{Kind: Info, Title: templates.RequestTitle(*req), Text: templates.RequestAnswer(*req), Also: twice}
	case order.Status == models.OrderPaid && repeated == AlreadyPaid:
		return Told(Info, models.ErrOrderPaid.Shopper, "")
	case order.Status == models.OrderPaid:
		return &Notice{Kind: Success, Title: "Paid.", Text: "Thank you for your order: the payment went through.", Also: twice}
	case order.AwaitingAction() != nil:
		return &Notice{Kind: Info, Title: "Authenticate to pay.", Text: "Your card provider asks you to confirm this payment. Nothing is charged until you do; if you do not, the payment lapses and you can pay again.", Also: twice}
	case order.PaymentInDoubt():
		return &Notice{Kind: Info, Title: "Your last payment is being confirmed.", Text: "We are checking with the card provider whether it went through. You will not be charged twice; this page shows the result once it is known.", Also: twice}
	case lastAttemptFailed(order):
		return &Notice{Kind: Failure, Title: "Your last payment did not go through.", Text: "The card provider never took it, so nothing was charged. Choose a card and pay again.", Also: twice}
	case last != nil && last.Status == models.Declined:
		n := Told(Failure, models.ErrPaymentDeclined.Shopper, twice)
		n.Text = templates.DeclineReason(last.DeclineReason) + n.Text
		return n
	case twice != "":
		return &Notice{Kind: Info, Title: "Sent twice, done once.", Text: twice}
	}
	return nil
}

// lastAttemptFailed: the order's latest attempt reached no charge — the
// provider refused it, or, past the roll-forward window, had no record of it.
func lastAttemptFailed(order models.Order) bool {
	last := latest(order.Attempts, func(a models.PaymentAttempt) time.Time { return a.CreatedAt })
	return last != nil && last.State == models.Failed
}

func LastRefund(o models.Order) *models.Refund {
	return latest(o.Refunds, func(r models.Refund) time.Time { return r.CreatedAt })
}

// latest is the row created last (the later one of a tie), nil for none.
func latest[T any](rows []T, createdAt func(T) time.Time) *T {
	var last *T
	for i := range rows {
		if last == nil || !createdAt(rows[i]).Before(createdAt(*last)) {
			last = &rows[i]
		}
	}
	return last
}

func cancelled(order models.Order, expiry time.Duration, twice string) *Notice {
	title := "You cancelled this order."
	switch order.CancelReason {
	case models.CancelledExpired:
		title = fmt.Sprintf("This order was cancelled because it was not paid within %s; its items went back on the shelf.", spanWords(expiry))
	case models.CancelledByStaff:
		title = "The shop's staff cancelled this order."
	}
	return &Notice{Kind: Success, Title: title, Text: "Nothing was charged. You can place a new order from the catalog.", Also: twice}
}

// spanWords is a duration as a shopper says it: "30 minutes", "1 hour".
func spanWords(d time.Duration) string {
	unit, n := "minute", int64(d/time.Minute)
	switch {
	case d%time.Hour == 0:
		unit, n = "hour", int64(d/time.Hour)
	case d%time.Minute != 0:
		return d.String()
	}
	return count(n, unit)
}

func count(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
