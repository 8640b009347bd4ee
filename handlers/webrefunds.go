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
