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

// refusedByOrder shows the order page again with the refused cancel form,
// told in the words of the error the order's state answered. The form
// keeps its key when nothing was stored under it, so that the corrected
// form runs with it; after a final answer, stored under that key, it gets
// a fresh one.
func (s *Server) refusedByOrder(c *gin.Context, err error) {
	p, words, final := s.answerOf(c, err)
	s.refusedForm(c, p.Status, words.Text, func(view *orderPageView, sent string) {
		view.Key, view.CancelKey = uuid.NewString(), sent
		if final {
			view.CancelKey = uuid.NewString()
		}
	})
}

// refusedForm shows the order page again (status) with a refused form as
// it was sent (keep sets its keys from the key sent), and why.
func (s *Server) refusedForm(c *gin.Context, status int, text string, keep func(view *orderPageView, sent string)) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	view := orderPageView{layout: s.layout(c), Order: order, Methods: s.cardChoice()}
	keep(&view, postForm(c).Get(middleware.FormKeyField))
	view.Notice = errorNotice(text)
	s.renderPage(c, status, "order.html", view)
}

// lastRefund is the order's latest refund, nil when it has none.
func lastRefund(o models.Order) *models.Refund {
	return latest(o.Refunds, func(r models.Refund) time.Time { return r.CreatedAt })
}
