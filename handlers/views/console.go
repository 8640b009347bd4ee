package views

import (
	"fmt"
	"strings"
	"time"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/templates"
)

type (
	StaffOrders struct {
		Layout
		Orders    []orders.OrderOfUser
		Q, Status string
		Statuses  []string // the filter's choices, besides any status
		Older     string   // the next page; empty on the last
	}
	// StaffOrder is the console's order page, with each form's key.
	StaffOrder struct {
		Layout
		orders.OrderHistory
		RefundKey, CancelKey string
		DeclineKeys          map[string]string
		Refundable           int64
	}
	StaffProduct struct {
		models.Product
		Key string
	}
	StaffProducts struct {
		Layout
		Products []StaffProduct
	}
	StaffDoubt struct {
		orders.Doubt
		Age, Key string
	}
	StaffDoubts struct {
		Layout
		Doubts []StaffDoubt
	}
	StaffDeliveries struct {
		Layout
		Deliveries []models.WebhookDelivery
		Key        string // of this page's forms, each adding its delivery's id
	}
	StaffParked struct {
		Layout
		Parked []outbox.Parked
		Key    string // of this page's forms, each adding its event's id
	}
)

func (v StaffOrder) nameOf(id *string) string {
	if id == nil {
		return "a staff member (not recorded)"
	}
	if email, ok := v.Names[*id]; ok {
		return email
	}
	return "a former user"
}

// RefundLine is one refund: how much, how it stands, who gave it and why.
func (v StaffOrder) RefundLine(r models.Refund) string {
	text := models.Money(r.AmountCents, r.Currency) + " by " + v.nameOf(r.CreatedBy) + ": " + templates.StateName(r.State) + "."
	if r.Reason != "" {
		text += " Reason: " + r.Reason
	}
	if r.FailureReason != "" {
		text += " The provider said: " + r.FailureReason
	}
	return text
}

// RequestLine is one of the shopper's requests for a refund and its answer.
func (v StaffOrder) RequestLine(r models.RefundRequest) string {
	text := templates.AskedForRefund("The shopper", r)
	switch r.State {
	case models.RequestFulfilled:
		return text + ": refunded."
	case models.RequestDeclined:
		return text + ": declined by " + v.nameOf(r.DecidedBy) + ". Reason: " + r.DeclineReason
	}
	return text + ": open."
}

// Cancellation says who cancelled the order, "" when it is not cancelled.
func (v StaffOrder) Cancellation() string {
	if v.Order.Status != models.OrderCancelled {
		return ""
	}
	switch v.Order.CancelReason {
	case models.CancelledExpired:
		return "Cancelled by the expiry sweep: nobody paid it in time."
	case models.CancelledByStaff:
		return "Cancelled by the shop's staff."
	}
	return "Cancelled by its shopper."
}

var actionWords = map[audit.Action]string{
	audit.ActionOrderPlaced: "Placed the order", audit.ActionOrderCancelled: "Cancelled the order",
	audit.ActionRefundRequested: "Asked for a refund", audit.ActionRequestDeclined: "Declined the request for a refund",
	audit.ActionRefundGiven: "Gave a refund", audit.ActionRestocked: "Restocked",
	audit.ActionChargeSucceeded: "Charge succeeded", audit.ActionChargeDeclined: "Card declined",
	audit.ActionLateCharge: "A late charge landed", audit.ActionRefundSucceeded: "Refund succeeded",
	audit.ActionRefundPending: "Refund on its way", audit.ActionRefundFailed: "Refund failed",
	audit.ActionLateRefund: "A late refund landed", audit.ActionRefundExcess: "Refunded twice (recover it)",
}

// actorWords are the shop's own actors, who are no user.
var actorWords = map[audit.ActorKind]string{
	audit.ActorReconciler: "the reconciler", audit.ActorWebhook: "a webhook of the provider",
	audit.ActorExpiry: "the expiry sweep", audit.ActorProviderReturn: "the shopper's return from the card provider",
}

// TrailLine is one audit entry: what was done, by whom, for how much and why.
func (v StaffOrder) TrailLine(e audit.Entry) string {
	what, ok := actionWords[e.Action]
	if !ok {
		what = string(e.Action)
	}
	who := actorWords[e.Actor.Kind]
	if e.Actor.UserID != nil {
		who = v.nameOf(e.Actor.UserID)
		if e.Actor.Kind == audit.ActorStaff {
			who += " (staff)"
		}
	}
	text := what + ", by " + who
	if e.AmountCents != nil {
		text += ": " + models.Money(*e.AmountCents, v.Order.Currency)
	}
	if e.Reason != "" {
		text += ". Reason: " + e.Reason
	}
	return text + "."
}

func Restocked(p models.Product) *Notice {
	return &Notice{Kind: Success, Title: "Restocked.", Text: fmt.Sprintf("%s: %s on hand. %d held by unpaid orders, %d for sale.",
		p.Name, count(int64(p.OnHand()), "unit"), p.Held, p.Stock)}
}

// StockWords is a refused stock change: each field at fault, as the form names it.
func StockWords(e *models.Error) string {
	names := map[string]string{"stock": "The number", "reason": "The reason", "change": "The change"}
	said := make([]string, 0, len(e.Fields)+1)
	for _, f := range e.Fields {
		said = append(said, names[f.Field]+" "+f.Message+".")
	}
	return strings.Join(append(said, "Nothing was changed."), " ")
}

var StillInDoubt = &Notice{Kind: Info, Title: "Still in doubt.",
	Text: "The provider could not say what became of the request; it is still in doubt. Ask again later."}

// AgeWords is how old something is: "under a minute", "5 minutes", "2 days".
func AgeWords(d time.Duration) string {
	for _, u := range []struct {
		name string
		size time.Duration
	}{{"day", 24 * time.Hour}, {"hour", time.Hour}, {"minute", time.Minute}} {
		if n := int64(d / u.size); n >= 1 {
			return count(n, u.name)
		}
	}
	return "under a minute"
}

var deliveryStates = map[models.DeliveryState]string{
	models.DeliveryPending:   "waiting to be sent",
	models.DeliveryDelivered: "accepted by the endpoint",
	models.DeliveryFailed:    "refused at every attempt, given up",
}

func (StaffDeliveries) DeliveryState(d models.WebhookDelivery) string {
	return deliveryStates[d.State] + ", after " + count(int64(d.Attempts), "attempt")
}

// Redelivered says that delivery id was sent again (once, if sent twice).
func Redelivered(deliveries []models.WebhookDelivery, id string, twice bool) *Notice {
	what := "The message"
	for _, d := range deliveries {
		if d.ID == id {
			what = "The " + d.EventType + " message"
		}
	}
	n := &Notice{Kind: Success, Title: what + " is being sent again.",
		Text: "It goes to the webhook endpoint at the sender's next round, with the same webhook-id and body; reload this page to see its new attempt."}
	if twice {
		n.Also = "Sent twice, done once: the form was sent more than once; the message is sent again once."
	}
	return n
}
