package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
)

// paymentLocation is where a payment is served, the Location of its 201
// (and of a declined payment's 402).
func paymentLocation(p models.Payment) string {
	return orderLocation(p.OrderID) + "/payments/" + p.ID
}

// getPayment answers one payment of one of the user's orders.
func (s *Server) getPayment(c *gin.Context) {
	payment, err := s.shop.Payment(c.Request.Context(), currentUser(c).ID, c.Param("id"), c.Param("payment_id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, models.ViewPayment(payment))
}
