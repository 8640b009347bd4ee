package views

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// Activity is one thing the shopper asked the shop to do, and how it ended.
type Activity struct {
	When   time.Time
	What   string
	Href   string
	Result string
}

// Account is the account page: what the shop remembers of the forms sent.
type Account struct {
	Layout
	Activity []Activity
}

// StoredRefusals are a form's final refusals that leave no trace, by its
// route's end: a key keeps only their status, so one form's are told alike.
var StoredRefusals = map[string][]*models.Error{
	"/payments": {models.ErrOrderPaid, models.ErrOrderCancelled},
	"/refunds":  {models.ErrRefundExceeds},
	"/cancel":   {models.ErrPaidNotCancellable},
}

// AccountOf tells each of the user's keys, newest first.
func AccountOf(layout Layout, keys []middleware.IdempotencyKey, traces audit.Traces) Account {
	named := namedOrders(keys, traces.Numbers)
	v := Account{Layout: layout}
	for _, k := range keys {
		v.Activity = append(v.Activity, ActivityOf(k, traces, named[k.Target]))
	}
	return v
}

// namedOrders are the orders the keys' requests named, by the keys' Target
// (each route hashed with each of the user's orders): even a request that
// left no answer and no trace names its order.
func namedOrders(keys []middleware.IdempotencyKey, numbers map[string]int64) map[string]string {
	named := map[string]string{}
	hashed := map[string]bool{}
	for _, k := range keys {
		route := k.Method + " " + k.Route
		if hashed[route] || strings.Count(k.Route, ":") != 1 || !strings.Contains(k.Route, "/orders/:id/") {
			continue
		}
		hashed[route] = true
		for id := range numbers {
			named[middleware.TargetOf(k.Method, k.Route, gin.Params{{Key: "id", Value: id}})] = id
		}
	}
	return named
}

// ActivityOf tells key k's operation, about order orderID or its trace's.
func ActivityOf(k middleware.IdempotencyKey, traces audit.Traces, orderID string) Activity {
	a := Activity{When: k.CreatedAt}
	ref := middleware.DerivedKeyOf(k)
	p, paid := traces.Payments[ref]
	r, refunded := traces.Refunds[ref]
	switch {
	case paid:
		orderID = p.OrderID
	case refunded:
		orderID = r.OrderID
	}
	order := "an order"
	if number, ok := traces.Numbers[orderID]; ok {
		order, a.Href = fmt.Sprintf("order #%d", number), OrderPath(orderID)
	}
	done := "done"
	var refused *models.Error
	switch amount := models.Money(r.AmountCents, r.Currency); {
	case strings.HasSuffix(k.Route, "/payments"):
		a.What = "Tried to pay for " + order
		if paid && p.Status == models.Succeeded {
			a.What = "Paid " + order
		} else if paid && p.Status == models.Declined {
			a.What, refused = "Tried to pay "+order, models.ErrPaymentDeclined
		}
	case strings.HasSuffix(k.Route, "/refunds"):
		a.What = "Asked for a refund on " + order
		if refunded && r.State == models.Failed {
			a.What, refused = "Asked for a refund of "+amount+" on "+order, models.ErrRefundFailed
		} else if refunded {
			a.What = "Refunded " + amount + " on " + order
		}
	case strings.HasSuffix(k.Route, "/refund-requests"):
		a.What, done = "Asked for a refund on "+order, "the shop's staff will answer it"
	case strings.HasSuffix(k.Route, "/cancel"):
		a.What, done = "Cancelled "+order, "nothing was charged"
	case strings.HasSuffix(k.Route, "/password"):
		a.What, done = "Tried to change your password", "your other browsers and apps were signed out"
		if k.State == middleware.KeyCompleted {
			a.What = "Changed your password"
		}
	case strings.HasSuffix(k.Route, "/orders"):
		a.What = "Tried to place an order"
		if o, ok := traces.Orders[ref]; ok {
			a.Href, a.What = OrderPath(o.ID), fmt.Sprintf("Placed order #%d", o.Number)
		}
	default:
		a.What = "Sent a form to " + k.Route
		for suffix, what := range staffActs {
			if strings.HasSuffix(k.Route, suffix) {
				a.What = what
			}
		}
	}
	if strings.HasPrefix(k.Route, "/api/") {
		a.What += " from the app"
	}
	a.Result = resultOf(k, done, refused)
	if paid && p.Status == models.Succeeded && k.Released() {
		a.Result = "its first answer was unclear, and the shop has since confirmed the payment with the provider"
	}
	return a
}

// staffActs are the staff acts on no order of the user's own, by route's end.
var staffActs = map[string]string{
	"/decline":        "Declined a shopper's request for a refund",
	"/products/stock": "Changed a product's stock",
	"/redeliver":      "Sent a webhook again",
	"/retry":          "Sent a parked message again",
	"/:request_id":    "Asked the payment provider about an unconfirmed payment or refund",
}

// resultOf is how an operation ended, and how often its form was sent.
func resultOf(k middleware.IdempotencyKey, done string, refused *models.Error) string {
	result := done
	switch {
	case k.Released():
		return "it did not go through and nothing was saved, so you can send it again"
	case k.State != middleware.KeyCompleted:
		return "still being worked on"
	case refused != nil:
		result = WordsOf(refused).Outcome
	case k.Status >= http.StatusBadRequest:
		result = refusalOf(k.Route)
	}
	switch k.Replays {
	case 0:
		return result
	case 1:
		return result + " (you sent it twice; it happened once)"
	}
	return result + " (you sent it " + strconv.Itoa(k.Replays+1) + " times; it happened once)"
}

// refusalOf tells a form's stored refusal in the words of its final errors.
func refusalOf(route string) string {
	for suffix, finals := range StoredRefusals {
		if strings.HasSuffix(route, suffix) {
			return WordsOf(finals[0]).Outcome
		}
	}
	return "it was refused, and nothing was done"
}
