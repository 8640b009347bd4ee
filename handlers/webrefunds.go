package handlers

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// The order page's Refund form and Cancel order button. Like the pay form,
// each render carries a fresh key, so a double-click or a resubmission
// gives money back once.

// refundFailed names, in the repeat cookie, a refund form whose refund the
// provider refused: nothing was given back.
const refundFailed = "refund-failed"

// dollars is an amount as a shopper types it: 12, 12.5 or 12.00.
var dollars = regexp.MustCompile(`^\$?([0-9]{1,9})(?:\.([0-9]{1,2}))?$`)

// refundForm decodes the Refund form: an empty amount is everything still
// refundable. It returns what to tell the shopper when the form is wrong.
func refundForm(c *gin.Context) (models.RefundInput, string) {
	form := postForm(c)
	in := models.RefundInput{Reason: strings.TrimSpace(form.Get("reason"))}
	if utf8.RuneCountInString(in.Reason) > maxReason {
		return in, "Keep the reason under 200 characters."
	}
	typed := strings.TrimSpace(form.Get("amount"))
	if typed == "" {
		return in, ""
	}
	m := dollars.FindStringSubmatch(typed)
	if m == nil {
		return in, "Enter an amount in dollars, such as 12.00."
	}
	whole, _ := strconv.ParseInt(m[1], 10, 64)
	cents, _ := strconv.ParseInt((m[2] + "00")[:2], 10, 64)
	amount := whole*100 + cents
	if amount <= 0 {
		return in, "Enter an amount greater than $0.00."
	}
	in.AmountCents = &amount
	return in, ""
}

// refundOrder gives money back on a paid order and goes back to the order
// page, which tells how it went. A wrong amount gets the page again with
// the form as it was typed, and nothing refunded.
func (s *Server) refundOrder(c *gin.Context) {
	in, problemText := refundForm(c)
	if problemText != "" {
		s.refusedOrderForm(c, http.StatusUnprocessableEntity, problemText, false)
		return
	}
	refund, err := s.payments.Refund(c.Request.Context(), operationOf(c), currentUser(c).ID, c.Param("id"), in)
	switch {
	case errors.Is(err, models.ErrRefundExceeds), errors.Is(err, models.ErrOrderNotPaid):
		s.refusedByOrder(c, err)
		return
	case err != nil:
		s.fail(c, err)
		return
	case refund.State == models.Failed:
		s.markOrderPage(c, refundFailed)
	}
	c.Redirect(http.StatusSeeOther, orderPage(c.Param("id")))
}

// cancelPendingOrder cancels an order nobody paid; a paid one gets the page
// again, saying to refund it instead.
func (s *Server) cancelPendingOrder(c *gin.Context) {
	_, err := s.cancel(c)
	if errors.Is(err, models.ErrPaidNotCancellable) {
		s.refusedByOrder(c, err)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, orderPage(c.Param("id")))
}

// refusedByOrder shows the order page again with the refused form, told in
// the words of the error the order's state answered.
func (s *Server) refusedByOrder(c *gin.Context, err error) {
	p, words, final := s.answerOf(c, err)
	s.refusedOrderForm(c, p.Status, words.Text, final)
}

// refusedOrderForm shows the order page again with the refused form as it
// was sent, and why. The form keeps its key when nothing was stored under
// it, so that the corrected form runs with it; after a final answer, stored
// under that key, it gets a fresh one.
func (s *Server) refusedOrderForm(c *gin.Context, status int, text string, final bool) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	form := postForm(c)
	view := orderPageView{layout: s.layout(c), Order: order, Key: uuid.NewString(), Methods: s.cardChoice(),
		RefundKey: form.Get(middleware.FormKeyField), RefundAmount: form.Get("amount"), RefundReason: form.Get("reason")}
	if final {
		view.RefundKey = uuid.NewString()
	}
	if strings.HasSuffix(c.Request.URL.Path, "/refunds") {
		view.RefundError = text
	}
	view.Notice = errorNotice(text)
	s.renderPage(c, status, "order.html", view)
}

// refundable is what can still be given back on the order.
func refundable(o models.Order) int64 {
	var charged int64
	for _, p := range o.Payments {
		if p.Status == models.PaymentSucceeded {
			charged += p.AmountCents
		}
	}
	return charged - o.RefundedCents
}

// lastRefund is the order's latest refund, nil when it has none.
func lastRefund(o models.Order) *models.Refund {
	var last *models.Refund
	for i, r := range o.Refunds {
		if last == nil || !r.CreatedAt.Before(last.CreatedAt) {
			last = &o.Refunds[i]
		}
	}
	return last
}

// refundSentence is one refund of the order's history, in a shopper's words.
func refundSentence(o models.Order, r models.Refund) string {
	card := "your card"
	if p := lastSucceededPayment(o); p != nil {
		card = "the " + cardName(p.PaymentMethod)
	}
	text := money(r.AmountCents, r.Currency) + " refunded to " + card + "."
	if r.State == models.Pending {
		text = money(r.AmountCents, r.Currency) + " is on its way back to " + card + "."
	}
	if r.Reason != "" {
		text += " Reason: " + r.Reason
	}
	return text
}

func lastSucceededPayment(o models.Order) *models.Payment {
	for i, p := range o.Payments {
		if p.Status == models.PaymentSucceeded {
			return &o.Payments[i]
		}
	}
	return nil
}

// refundTitle is the outcome of the order's latest refund, as the order page
// opens with it: "Refunded $12.00 to your Test Visa card."
func refundTitle(o models.Order, r models.Refund) string {
	card := "card"
	if p := lastSucceededPayment(o); p != nil {
		card = cardName(p.PaymentMethod)
	}
	if r.State == models.Pending {
		return "Refund of " + money(r.AmountCents, r.Currency) + " on its way to your " + card + "."
	}
	return "Refunded " + money(r.AmountCents, r.Currency) + " to your " + card + "."
}
