package handlers

import (
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// The order page's Cancel order button, and how the page tells refunds
// (which staff give). Like the pay form, each render carries a fresh key,
// so a double-click or a resubmission cancels once.

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
	view := orderPageView{layout: s.layout(c), Order: order, Key: uuid.NewString(), Methods: s.cardChoice(),
		CancelKey: postForm(c).Get(middleware.FormKeyField)}
	if final {
		view.CancelKey = uuid.NewString()
	}
	view.Notice = errorNotice(text)
	s.renderPage(c, status, "order.html", view)
}

// lastRefund is the order's latest refund, nil when it has none.
func lastRefund(o models.Order) *models.Refund {
	return latest(o.Refunds, func(r models.Refund) time.Time { return r.CreatedAt })
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
		if p.Status == models.Succeeded {
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
