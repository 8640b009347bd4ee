package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// The staff API: every user's orders, with the console's filters, and any
// one order with its shopper and the requests for its refund. Staff only
// (requireStaff).

// staffOrderJSON is an order with its shopper.
type staffOrderJSON struct {
	Order  models.OrderJSON `json:"order"`
	UserID string           `json:"user_id"`
	Email  string           `json:"email"`
}

// staffOrderDetailJSON is one order as staff read it: with the shopper's
// requests for a refund.
type staffOrderDetailJSON struct {
	staffOrderJSON
	RefundRequests []refundRequestJSON `json:"refund_requests"`
}

func staffOrderOf(o orders.OrderOfUser) staffOrderJSON {
	return staffOrderJSON{Order: models.ViewOrder(o.Order), UserID: o.UserID, Email: o.Email}
}

// staffListOrders is every user's orders, newest first, a page at a
// time, as the query asks (q: an order number or an email, status, limit,
// after): GET /api/v1/staff/orders, and the console's front page.
func (s *Server) staffListOrders(c *gin.Context) {
	filter, err := orders.ParseOrderFilter(c.Query("q"), c.Query("status"))
	var list []orders.OrderOfUser
	var next *cursor
	limit := 0
	if err == nil {
		list, next, limit, err = readPage(c, func(from *database.Position, limit int) ([]orders.OrderOfUser, bool, error) {
			return s.shop.AllOrdersPage(c.Request.Context(), filter, from, limit)
		}, func(o orders.OrderOfUser) cursor { return cursor{o.CreatedAt, o.ID} })
	}
	if isPage(c) {
		s.allOrdersPage(c, list, next, limit, err)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]staffOrderJSON, 0, len(list))
	for _, o := range list {
		out = append(out, staffOrderOf(o))
	}
	writePage(c, "orders", out, next, limit)
}

// staffGetOrder is any user's order: GET /api/v1/staff/orders/{id}, and
// the console's page of it, with all that happened to it and the forms of
// what staff may do with it.
func (s *Server) staffGetOrder(c *gin.Context) {
	if isPage(c) {
		s.showStaffOrder(c, http.StatusOK, nil)
		return
	}
	h, err := s.shop.OrderHistory(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	out := staffOrderDetailJSON{staffOrderJSON: staffOrderOf(h.OrderOfUser), RefundRequests: make([]refundRequestJSON, 0, len(h.Requests))}
	for _, r := range h.Requests {
		out.RefundRequests = append(out.RefundRequests, refundRequestView(r))
	}
	c.JSON(http.StatusOK, out)
}
