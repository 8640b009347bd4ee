package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

type receiptView struct {
	layout
	Order models.Order
	// Charges are the order's succeeded payments; its declines are not
	// part of a receipt.
	Charges []models.Payment
}

// receiptPage is a paid order's receipt, made to be printed: its number and
// date, the items and total, and what was charged to which card. An order
// nothing was charged for has no receipt yet.
func (s *Server) receiptPage(c *gin.Context) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	view := receiptView{layout: s.layout(c), Order: order}
	for _, p := range order.Payments {
		if p.Status == models.Succeeded {
			view.Charges = append(view.Charges, p)
		}
	}
	if len(view.Charges) == 0 {
		s.fail(c, problem.NotFound.With("This order has no receipt yet: it is not paid."))
		return
	}
	s.renderPage(c, http.StatusOK, "receipt.html", view)
}
