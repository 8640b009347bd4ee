package templates

import (
	"bytes"
	"html/template"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

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

// Render renders the page into a buffer first, so that a template error
// sends an error page instead of half a page.
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
	"methodName":      MethodName,
	"paymentSentence": paymentSentence,
	"statusName":      StatusName,
	"paid":            paid,
	"refundSentence":  refundSentence,
	"requestSentence": requestSentence,
	"stateName":       StateName,
}

// when is a time as the page prints it before the script, when there is
// one, rewrites it in the shopper's own time zone from its datetime.
func when(t time.Time) template.HTML {
	t = t.UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `">` + t.Format("2 Jan 2006 15:04 UTC") + `</time>`)
}

// day is a date alone, for lists that must fit a phone; the script rewrites
// it in the shopper's time zone too.
func day(t time.Time) template.HTML {
	t = t.UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `" data-day>` + t.Format("2 Jan 2006") + `</time>`)
}

// StatusName is an order's status in a shopper's words.
func StatusName(status string) string {
	switch status {
	case models.OrderPending:
		return "Awaiting payment"
	case models.OrderPaid:
		return "Paid"
	case models.OrderPartiallyRefunded:
		return "Partly refunded"
	case models.OrderRefunded:
		return "Refunded"
	case models.OrderCancelled:
		return "Cancelled"
	}
	return status
}

// cards are the test cards: one name each, for the pay form and a
// payment's history alike, and what choosing one does, for the pay form.
// A method not here is named after its id.
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

func cardName(value string) string {
	if card, ok := cards[value]; ok {
		return card.name
	}
	return "Test card “" + strings.TrimPrefix(value, "pm_card_") + "”"
}

// MethodName is a payment method as the pay form offers it.
func MethodName(value string) string { return cardName(value) + cards[value].does }

// paymentSentence is one payment of the order's history, in a shopper's
// words: what happened to how much, on which card, and the bank's reason
// for a decline.
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

// paid says whether the order was charged: it has a receipt.
func paid(o models.Order) bool {
	return slices.ContainsFunc(o.Payments, func(p models.Payment) bool { return p.Status == models.Succeeded })
}

// refundSentence is one refund of the order's history, in a shopper's
// words; RefundTitle, the order page's notice of its latest.
func refundSentence(o models.Order, r models.Refund) string {
	card, amount := "your card", models.Money(r.AmountCents, r.Currency)
	if p := chargedPayment(o); p != nil {
		card = "the " + cardName(p.PaymentMethod)
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
	card, amount := "card", models.Money(r.AmountCents, r.Currency)
	if p := chargedPayment(o); p != nil {
		card = cardName(p.PaymentMethod)
	}
	if r.State == models.Pending {
		return "Refund of " + amount + " on its way to your " + card + "."
	}
	return "Refunded " + amount + " to your " + card + "."
}

func chargedPayment(o models.Order) *models.Payment {
	for i, p := range o.Payments {
		if p.Status == models.Succeeded {
			return &o.Payments[i]
		}
	}
	return nil
}

// requestSentence is one request of the order's history, in a shopper's
// words.
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

// AskedForRefund is the start of a sentence on a request for a refund:
// who asked and, when they said, why.
func AskedForRefund(who string, r models.RefundRequest) string {
	if r.Reason != "" {
		return who + " asked for a refund (" + r.Reason + ")"
	}
	return who + " asked for a refund"
}

// The console's acts, as their handlers mark them done on the order's
// console page; a replay of one is marked with Again after it.
const (
	ActRefunded  = "refunded"
	ActDeclined  = "declined"
	ActCancelled = "cancelled"
	Again        = " again"
)

// StaffDid is what the console's order page opens with after a staff
// member's act on the order (one of the acts above, as marked), in words
// that name the order and the amount (of r, its latest refund), and, when
// its form was sent again, that it was done once.
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
func StateName(s models.State) string {
	if name, ok := stateNames[s]; ok {
		return name
	}
	return string(s)
}

// RequestTitle and RequestAnswer are what the order page opens with while
// the shopper's latest request for a refund is open or declined.
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
