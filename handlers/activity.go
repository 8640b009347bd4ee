package handlers

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

// activity is one thing the shopper asked the shop to do, told as a
// sentence: what it was, the order it is about, and how it ended.
type activity struct {
	When   time.Time
	What   string
	Href   string
	Result string
}

type accountPageView struct {
	layout
	Activity []activity
}

// accountPage is the shopper's account: who they are signed in as, and
// their activity, what the shop remembers of the forms they sent. The
// developer's view of the same keys is GET /api/v1/idempotency-keys.
func (s *Server) accountPage(c *gin.Context) {
	user := currentUser(c)
	keys, err := s.idempotency.Keys(c.Request.Context(), user.ID, 100)
	if err != nil {
		s.fail(c, err)
		return
	}
	refs := make([]string, len(keys))
	for i, k := range keys {
		refs[i] = middleware.DerivedKeyOf(k)
	}
	traces, err := s.trail.TracesOf(c.Request.Context(), user.ID, refs)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := accountPageView{layout: s.layout(c)}
	named := namedOrders(keys, traces.Numbers)
	for _, k := range keys {
		view.Activity = append(view.Activity, activityOf(k, traces, named[k.Target]))
	}
	s.renderPage(c, http.StatusOK, "account.html", view)
}

// storedRefusals are, by the end of a form's route, the final errors the
// form may be refused with that leave no trace (a declined payment and a
// failed refund are told by theirs). The list of keys keeps no answer but
// its status, so the errors of one form are told alike
// (TestActivityTellsEveryFinalAnswer).
var storedRefusals = map[string][]*models.Error{
	"/payments": {models.ErrOrderPaid, models.ErrOrderCancelled},
	"/refunds":  {models.ErrRefundExceeds},
	"/cancel":   {models.ErrPaidNotCancellable},
}

// namedOrders are the user's orders that the keys' requests named in their
// path (which order to pay, cancel or refund), by the keys' Target: each
// route with an order's id is hashed with each of the user's orders, so
// even a request that left no answer and no trace names its order.
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

// activityOf tells the operation of key k; orderID is the order its request
// named, "" for none.
func activityOf(k middleware.IdempotencyKey, traces audit.Traces, orderID string) activity {
	a := activity{When: k.CreatedAt}
	ref := middleware.DerivedKeyOf(k)
	done := "done"
	var refused *models.Error
	order, href := onOrder(traces, orderID)
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
			a.Href = orderPage(o.ID)
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

// staffActs are the console's and the staff API's acts that are not about
// one of the user's own orders, by the end of their route.
var staffActs = map[string]string{
	"/decline":        "Declined a shopper's request for a refund",
	"/products/stock": "Changed a product's stock",
	"/redeliver":      "Sent a webhook again",
	"/retry":          "Sent a parked message again",
	"/:request_id":    "Asked the payment provider about an unconfirmed payment or refund",
}

// staffAct is how the staff act of route is told; a route staffActs does
// not know yet is named as it is.
func staffAct(route string) string {
	for suffix, what := range staffActs {
		if strings.HasSuffix(route, suffix) {
			return what
		}
	}
	return "Sent a form to " + route
}

// onOrder is the order of orderID as the shopper knows it, and its page;
// "an order" and no page when the shopper has no such order.
func onOrder(traces audit.Traces, orderID string) (order, href string) {
	number, ok := traces.Numbers[orderID]
	if !ok {
		return "an order", ""
	}
	return fmt.Sprintf("order #%d", number), orderPage(orderID)
}

// paymentActivity is the payment a key made, and the error it was refused
// with when its trace tells one; without a trace, it is about the order its
// request named (order, at href).
func paymentActivity(traces audit.Traces, ref, order, href string) (what, link string, refused *models.Error) {
	p, ok := traces.Payments[ref]
	if !ok {
		return "Tried to pay for " + order, href, nil
	}
	number, page := traces.Numbers[p.OrderID], orderPage(p.OrderID)
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
		return fmt.Sprintf("Asked for a refund of %s on order #%d", amount, number), orderPage(r.OrderID), models.ErrRefundFailed
	}
	return fmt.Sprintf("Refunded %s on order #%d", amount, number), orderPage(r.OrderID), nil
}

// resultOf is how an operation ended — done says how when it was done,
// refused names the error its trace tells — and how often its form was
// sent.
func resultOf(k middleware.IdempotencyKey, done string, refused *models.Error) string {
	var result string
	switch {
	case k.Released():
		return "it did not go through and nothing was saved, so you can send it again"
	case k.State != middleware.KeyCompleted:
		return "still being worked on"
	case refused != nil:
		result = refused.Shopper.Outcome
	case k.Status >= http.StatusBadRequest:
		result = refusalOf(k)
	default:
		result = done
	}
	switch k.Replays {
	case 0:
		return result
	case 1:
		return result + " (you sent it twice; it happened once)"
	}
	return result + " (you sent it " + strconv.Itoa(k.Replays+1) + " times; it happened once)"
}

// refusalOf is how a form's stored refusal, a final answer, is told: in
// the words of the final errors of its form.
func refusalOf(k middleware.IdempotencyKey) string {
	for suffix, finals := range storedRefusals {
		if strings.HasSuffix(k.Route, suffix) {
			return finals[0].Shopper.Outcome
		}
	}
	return "it was refused, and nothing was done"
}
