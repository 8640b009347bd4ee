package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/problem"
	"github.com/shop/shop/templates"
)

// The staff API, and the staff console at /staff: pages like the shop's,
// every write a form with its own key through the same middleware.

// requireStaff lets only staff through, before the middleware, so that a
// refusal claims no key: 403, and 404 for a page of the console.
func (s *Server) requireStaff(c *gin.Context) {
	switch {
	case currentUser(c).IsStaff():
	case isPage(c) && (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead):
		s.fail(c, problem.NotFound.With(""))
	default:
		s.fail(c, models.ErrForbidden)
	}
}

type staffOrderJSON struct {
	Order  models.OrderJSON `json:"order"`
	UserID string           `json:"user_id"`
	Email  string           `json:"email"`
}

func staffOrderOf(o orders.OrderOfUser) staffOrderJSON {
	return staffOrderJSON{Order: models.ViewOrder(o.Order), UserID: o.UserID, Email: o.Email}
}

// staffListOrders is every user's orders, newest first, found by number or
// email (q) and by status; a search the console cannot read gets 400.
func (s *Server) staffListOrders(c *gin.Context) {
	filter, err := orders.ParseOrderFilter(c.Query("q"), c.Query("status"))
	var list []orders.OrderOfUser
	var next *cursor
	limit := 0
	if err == nil {
		list, next, limit, err = readPage(c, isUUID, func(from *database.Position, limit int) ([]orders.OrderOfUser, bool, error) {
			return s.shop.AllOrdersPage(c.Request.Context(), filter, from, limit)
		}, func(o orders.OrderOfUser) cursor { return cursor{o.CreatedAt, o.ID} })
	}
	view := views.StaffOrders{Layout: s.layout(c), Q: c.Query("q"), Status: c.Query("status"), Statuses: orders.OrderStatuses(), Orders: list}
	var e *models.Error
	switch {
	case isPage(c) && errors.As(err, &e) && e.Type == problem.InvalidParameter:
		view.Notice, view.Orders = views.Problem(e.Shopper.Text), nil
		s.renderPage(c, http.StatusBadRequest, "staff_orders.html", view)
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		if next != nil {
			view.Older = nextURL(c, *next, limit)
		}
		s.renderPage(c, http.StatusOK, "staff_orders.html", view)
	default:
		writePage(c, "orders", list, staffOrderOf, next, limit)
	}
}

// staffGetOrder is any user's order with the requests for its refund, or
// its console page.
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
	c.JSON(http.StatusOK, struct {
		staffOrderJSON
		RefundRequests []refundRequestJSON `json:"refund_requests"`
	}{staffOrderOf(h.OrderOfUser), each(h.Requests, refundRequestView)})
}

// showStaffOrder renders the console's order page, opening with n, or with
// what the form that led here did.
func (s *Server) showStaffOrder(c *gin.Context, status int, n *views.Notice) {
	h, err := s.shop.OrderHistory(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	refundable, err := s.ledger.Refundable(c.Request.Context(), h.Order.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.StaffOrder{Layout: s.layout(c), OrderHistory: h, RefundKey: uuid.NewString(), CancelKey: uuid.NewString(),
		DeclineKeys: map[string]string{}, Refundable: refundable}
	for _, r := range h.Requests {
		view.DeclineKeys[r.ID] = uuid.NewString()
	}
	// A form refused before it ran comes back with its key: nothing was
	// stored under it, so the corrected form runs with it.
	if sent := postForm(c).Get(middleware.FormKeyField); c.Request.Method == http.MethodPost && sent != "" {
		if id := c.Param("request_id"); id != "" {
			view.DeclineKeys[id] = sent
		} else {
			view.RefundKey = sent
		}
	}
	view.Notice = n
	if n == nil {
		if title, also := templates.StaffDid(s.takeRepeat(c), h.Order, views.LastRefund(h.Order)); title != "" {
			view.Notice = &views.Notice{Kind: views.Success, Title: title, Also: also}
		}
	}
	s.renderPage(c, status, "staff_order.html", view)
}

// staffDecline declines a request for a refund, for the reason typed.
func (s *Server) staffDecline(c *gin.Context) {
	reason, err := reasonField(postForm(c).Get("reason"))
	if err != nil || reason == "" {
		s.showStaffOrder(c, http.StatusUnprocessableEntity, views.Problem("Say why the request is declined, in at most 200 characters. Nothing was changed."))
		return
	}
	_, err = s.ledger.DeclineRequest(middleware.Tx(c), currentUser(c), c.Param("id"), c.Param("request_id"), reason, s.deps.Now().UTC())
	s.staffDid(c, err, templates.ActDeclined)
}

func (s *Server) staffCancel(c *gin.Context) {
	_, err := s.payments.CancelAny(middleware.Tx(c), currentUser(c), c.Param("id"))
	s.staffDid(c, err, templates.ActCancelled)
}

// staffDid goes back to the console's order page, which tells the act.
func (s *Server) staffDid(c *gin.Context, err error, act string) {
	if err != nil {
		s.fail(c, err)
		return
	}
	s.markPage(c, views.ConsolePath(c.Param("id")), act)
	c.Redirect(http.StatusSeeOther, views.ConsolePath(c.Param("id")))
}

// Routes lists the server's routes, for the tests that try each.
func (s *Server) Routes() gin.RoutesInfo { return s.router.Routes() }
