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

// StoredRefusals are, by the end of a form's route, the final errors the
// form may be refused with that leave no trace (a declined payment and a
// failed refund are told by theirs). A key keeps no answer but its status,
// so the errors of one form are told alike (TestActivityTellsEveryFinalAnswer).
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

// ActivityOf tells the operation of key k, about order orderID ("": none).
func ActivityOf(k middleware.IdempotencyKey, traces audit.Traces, orderID string) Activity {
	a := Activity{When: k.CreatedAt}
	ref := middleware.DerivedKeyOf(k)
	done := "done"
	var refused *models.Error
	order, href := "an order", ""
	if number, ok := traces.Numbers[orderID]; ok {
		order, href = fmt.Sprintf("order #%d", number), OrderPath(orderID)
	}
	switch {
	case strings.HasSuffix(k.Route, "/payments"):
		a.What, a.Href, refused = paymentActivity(traces, ref, order, href)
	case strings.HasSuffix(k.Route, "/refunds"):
		a.What, a.Href, refused = refundActivity(traces, ref, order, href)
	case strings.HasSuffix(k.Route, "/refund-requests"):
		a.What, a.Href = "Asked for a refund on "+order, href
		done = "the shop's staff will answer it"
	case strings.HasSuffix(k.Route, "/cancel"):
		a.What, a.Href = "Cancelled "+order, href
		done = "nothing was charged"
	case strings.HasSuffix(k.Route, "/password"):
		a.What = "Tried to change your password"
		if k.State == middleware.KeyCompleted {
			a.What = "Changed your password"
		}
		done = "your other browsers and apps were signed out"
	case strings.HasSuffix(k.Route, "/orders"):
		a.What = "Tried to place an order"
		if o, ok := traces.Orders[ref]; ok {
			a.Href = OrderPath(o.ID)
			a.What = fmt.Sprintf("Placed order #%d", o.Number)
		}
	default:
		a.What = staffAct(k.Route)
	}
	if strings.HasPrefix(k.Route, "/api/") {
		a.What += " from the app"
	}
	a.Result = resultOf(k, done, refused)
	if p, ok := traces.Payments[ref]; ok && p.Status == models.Succeeded && k.Released() {
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

func staffAct(route string) string {
	for suffix, what := range staffActs {
		if strings.HasSuffix(route, suffix) {
			return what
		}
	}
	return "Sent a form to " + route
}

// paymentActivity is the payment a key made, and the error its trace tells;
// without a trace, it is about the order its request named (at href).
func paymentActivity(traces audit.Traces, ref, order, href string) (what, link string, refused *models.Error) {
	p, ok := traces.Payments[ref]
	if !ok {
		return "Tried to pay for " + order, href, nil
	}
	number, page := traces.Numbers[p.OrderID], OrderPath(p.OrderID)
	switch p.Status {
	case models.Succeeded:
		return fmt.Sprintf("Paid order #%d", number), page, nil
	case models.Declined:
		return fmt.Sprintf("Tried to pay order #%d", number), page, models.ErrPaymentDeclined
	}
	return fmt.Sprintf("Tried to pay for order #%d", number), page, nil
}

func refundActivity(traces audit.Traces, ref, order, href string) (what, link string, refused *models.Error) {
	r, ok := traces.Refunds[ref]
	if !ok {
		return "Asked for a refund on " + order, href, nil
	}
	number, amount := traces.Numbers[r.OrderID], models.Money(r.AmountCents, r.Currency)
	if r.State == models.Failed {
		return fmt.Sprintf("Asked for a refund of %s on order #%d", amount, number), OrderPath(r.OrderID), models.ErrRefundFailed
	}
	return fmt.Sprintf("Refunded %s on order #%d", amount, number), OrderPath(r.OrderID), nil
}

// resultOf is how an operation ended (done: how, when it was; refused: the
// error its trace tells), and how often its form was sent.
func resultOf(k middleware.IdempotencyKey, done string, refused *models.Error) string {
	result := done
	switch {
	case k.Released():
		return "it did not go through and nothing was saved, so you can send it again"
	case k.State != middleware.KeyCompleted:
		return "still being worked on"
	case refused != nil:
		result = refused.Shopper.Outcome
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
			return finals[0].Shopper.Outcome
		}
	}
	return "it was refused, and nothing was done"
}
