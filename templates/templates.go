// Package templates is how the pages read: the HTML templates, embedded
// and parsed once, the shop's words for money, times, statuses and cards
// they use, rendered into a buffer.
package templates

import (
	"bytes"
	"cmp"
	"embed"
	"html/template"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// FS holds every template.
//
//go:embed *.html
var FS embed.FS

// Pages are the parsed pages, by file name.
type Pages map[string]*template.Template

// Parse builds the template cache: each page parsed once with the base
// layout, at start-up, so a broken template stops the server from starting.
func Parse() (Pages, error) {
	names, err := fs.Glob(FS, "*.html")
	if err != nil {
		return nil, err
	}
	pages := Pages{}
	for _, name := range names {
		if name == "base.html" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(FS, "base.html", name)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// Render renders into a buffer, so a template error sends an error page, not half a page.
func (p Pages) Render(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	err := p[name].ExecuteTemplate(&buf, "base", data)
	return buf.Bytes(), err
}

var funcs = template.FuncMap{
	"money":           models.Money,
	"lineTotal":       func(unit int64, quantity int) int64 { return unit * int64(quantity) },
	"when":            when,
	"day":             day,
	"cardName":        cardName,
	"methodName":      func(value string) string { return cardName(value) + cards[value].does },
	"paymentSentence": paymentSentence,
	"statusName":      func(status string) string { return inWords(statusNames, status) },
	"paid":            func(o models.Order) bool { return chargedCard(o) != "" },
	"refundSentence":  refundSentence,
	"requestSentence": requestSentence,
	"stateName":       StateName,
}

// when is a time as the page prints it until the script rewrites it in the
// shopper's own time zone; day, its date alone, for lists that fit a phone.
func when(t time.Time) template.HTML { return timeTag(t, "", "2 Jan 2006 15:04 UTC") }
func day(t time.Time) template.HTML  { return timeTag(t, " data-day", "2 Jan 2006") }

func timeTag(t time.Time, attr, layout string) template.HTML {
	t = t.UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `"` + attr + `>` + t.Format(layout) + `</time>`)
}

// inWords is key as names has it, or key itself when names has not.
func inWords[K ~string](names map[K]string, key K) string {
	if name, ok := names[key]; ok {
		return name
	}
	return string(key)
}

// statusNames are an order's statuses in a shopper's words.
var statusNames = map[string]string{
	models.OrderPending: "Awaiting payment", models.OrderPaid: "Paid", models.OrderPartiallyRefunded: "Partly refunded",
	models.OrderRefunded: "Refunded", models.OrderCancelled: "Cancelled",
}

// cards are the test cards' names (pay form and history alike) and what
// choosing one does (pay form).
var cards = map[string]struct{ name, does string }{
	payments.MethodVisa:              {"Test Visa card", " (is charged)"},
	payments.MethodMastercard:        {"Test Mastercard", " (is charged)"},
	payments.MethodChargeDeclined:    {"Test card that is declined", ""},
	payments.MethodInsufficientFunds: {"Test card without enough funds", ""},
	payments.MethodDeclined:          {"Test card that is declined", ""},
	payments.MethodUnavailable:       {"Test card whose provider is down", ""},
	payments.MethodRefundFail:        {"Test Visa card whose refunds fail", " (is charged; refunds fail: account closed)"},
	payments.MethodAuthentication:    {"Test card that asks you to authenticate", " (3-D Secure)"},
}

// cardName is a card's name; a method not in cards is named after its id.
func cardName(value string) string {
	if card, ok := cards[value]; ok {
		return card.name
	}
	return "Test card “" + strings.TrimPrefix(value, "pm_card_") + "”"
}

// paymentSentence is one payment of the order's history, in a shopper's words.
func paymentSentence(p models.Payment) string {
	amount, card := models.Money(p.AmountCents, p.Currency), cardName(p.PaymentMethod)
	if p.Status == models.RequiresAction {
		return amount + " on the " + card + ", waiting for you to authenticate it. Nothing is charged until you do."
	}
	if p.Status != models.Succeeded {
		return amount + " declined on the " + card + ". " + strings.TrimSpace(DeclineReason(p.DeclineReason)+" Nothing was charged.")
	}
	return amount + " charged to the " + card + "."
}

// DeclineReason is the provider's reason when it says more than "declined".
func DeclineReason(reason string) string {
	reason = strings.TrimSpace(reason)
	if reason == "" || strings.EqualFold(reason, "Your card was declined.") {
		return ""
	}
	return "The bank said: " + reason + " "
}

// refundSentence is one refund of the order's history, in a shopper's
// words; RefundTitle, the order page's notice of its latest.
func refundSentence(o models.Order, r models.Refund) string {
	card, amount := "your card", models.Money(r.AmountCents, r.Currency)
	if charged := chargedCard(o); charged != "" {
		card = "the " + charged
	}
	text := amount + " refunded to " + card + "."
	if r.State == models.Pending {
		text = amount + " is on its way back to " + card + "."
	}
	if r.Reason != "" {
		text += " Reason: " + r.Reason
	}
	return text
}

// RefundTitle is the outcome of the order's latest refund, as the order
// page opens with it: "Refunded $12.00 to your Test Visa card."
func RefundTitle(o models.Order, r models.Refund) string {
	card, amount := cmp.Or(chargedCard(o), "card"), models.Money(r.AmountCents, r.Currency)
	if r.State == models.Pending {
		return "Refund of " + amount + " on its way to your " + card + "."
	}
	return "Refunded " + amount + " to your " + card + "."
}

// chargedCard names the card the order was charged on, "" when it was not:
// a paid order has a receipt.
func chargedCard(o models.Order) string {
	for _, p := range o.Payments {
		if p.Status == models.Succeeded {
			return cardName(p.PaymentMethod)
		}
	}
	return ""
}

// requestSentence is one request of the order's history, in a shopper's words.
func requestSentence(r models.RefundRequest) string {
	text := AskedForRefund("You", r)
	switch r.State {
	case models.RequestFulfilled:
		return text + ": refunded."
	case models.RequestDeclined:
		return text + ": declined by the shop's staff. Reason: " + r.DeclineReason
	}
	return text + ": the shop's staff will answer it."
}

// AskedForRefund starts a sentence on a request: who asked and, if said, why.
func AskedForRefund(who string, r models.RefundRequest) string {
	if r.Reason != "" {
		return who + " asked for a refund (" + r.Reason + ")"
	}
	return who + " asked for a refund"
}

// The console's acts as their handlers mark them done; a replay, with Again.
const (
	ActRefunded  = "refunded"
	ActDeclined  = "declined"
	ActCancelled = "cancelled"
	Again        = " again"
)

// StaffDid is what the console's order page opens with after staff's act
// (as marked) on the order, r its latest refund; also, when sent twice.
func StaffDid(marked string, o models.Order, r *models.Refund) (title, also string) {
	act, twice := strings.CutSuffix(marked, Again)
	order, total := "order #"+strconv.FormatInt(o.Number, 10), models.Money(o.TotalCents, o.Currency)
	switch {
	case act == ActRefunded && r != nil && r.State == models.Pending:
		title = "Refund of " + models.Money(r.AmountCents, r.Currency) + " on " + order + " is on its way back to the card."
	case act == ActRefunded && r != nil:
		title = "Refunded " + models.Money(r.AmountCents, r.Currency) + " on " + order + "."
	case act == ActDeclined:
		title = "Declined the request for a refund on " + order + " (" + total + "): nothing was refunded."
	case act == ActCancelled:
		title = "Cancelled " + order + " (" + total + "): nothing was charged."
	default:
		return "", ""
	}
	if twice {
		also = "Sent twice, done once: the form was sent more than once; it was done once."
	}
	return title, also
}

// stateNames are the states of a request to the provider, in staff's words.
var stateNames = map[models.State]string{
	models.InDoubt: "in doubt (the provider's answer is not known yet)", models.Succeeded: "succeeded",
	models.Declined: "declined", models.Pending: "on its way back to the card", models.Failed: "failed, nothing was moved",
	models.Excess: "given back twice (recover it)", models.RequiresAction: "waiting for the shopper to authenticate",
}

// StateName is a request's state in staff's words.
func StateName(s models.State) string { return inWords(stateNames, s) }

// RequestTitle and RequestAnswer open the order page while the latest request is open or declined.
func RequestTitle(r models.RefundRequest) string {
	if r.State == models.RequestDeclined {
		return "Your request for a refund was declined."
	}
	return "Your request for a refund was received."
}

func RequestAnswer(r models.RefundRequest) string {
	if r.State == models.RequestDeclined {
		return "The shop's staff said: " + r.DeclineReason
	}
	return "The shop's staff answer each request; this page shows their answer."
}
