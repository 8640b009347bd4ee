package handlers

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"

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
	list, next, limit, err := readPage(c, isUUID, func(from *database.Position, limit int) ([]orders.OrderOfUser, bool, error) {
		filter, err := orders.ParseOrderFilter(c.Query("q"), c.Query("status"))
		if err != nil {
			return nil, false, err
		}
		return s.shop.AllOrdersPage(c.Request.Context(), filter, from, limit)
	}, func(o orders.OrderOfUser) cursor { return cursor{o.CreatedAt, o.ID} })
	view := views.StaffOrders{Layout: s.layout(c), Q: c.Query("q"), Status: c.Query("status"), Statuses: orders.OrderStatuses(), Orders: list}
	var e *models.Error
	switch {
	case isPage(c) && errors.As(err, &e) && e.Type == problem.InvalidParameter:
		view.Notice = views.Problem(views.WordsOf(e).Text)
		s.renderPage(c, http.StatusBadRequest, "staff_orders.html", view)
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		view.Older = nextURL(c, next, limit)
		s.renderPage(c, http.StatusOK, "staff_orders.html", view)
	default:
		c.JSON(http.StatusOK, pageJSON(c, "orders", list, staffOrderOf, next, limit))
	}
}

// staffGetOrder is any user's order with its refund requests, or its page.
func (s *Server) staffGetOrder(c *gin.Context) {
	if isPage(c) {
		s.showStaffOrder(c, http.StatusOK, nil)
		return
	}
	h, err := s.shop.OrderHistory(c.Request.Context(), c.Param("id"))
	s.reply(c, err, http.StatusOK, struct {
		staffOrderJSON
		RefundRequests []refundRequestJSON `json:"refund_requests"`
	}{staffOrderOf(h.OrderOfUser), each(h.Requests, refundRequestView)})
}

// showStaffOrder renders the console's order page, opening with n or the last act.
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
	s.did(c, err, views.ConsolePath(c.Param("id")), templates.ActDeclined)
}

func (s *Server) staffCancel(c *gin.Context) {
	_, err := s.payments.CancelAny(middleware.Tx(c), currentUser(c), c.Param("id"))
	s.did(c, err, views.ConsolePath(c.Param("id")), templates.ActCancelled)
}

// Routes lists the server's routes, for the tests that try each.
func (s *Server) Routes() gin.RoutesInfo { return s.router.Routes() }

func (s *Server) staffProductsPage(c *gin.Context) {
	s.showStaffProducts(c, s.shop, http.StatusOK, nil)
}

// showStaffProducts renders the products as shop reads them (after a restock,
// the operation's transaction, which holds the new count).
func (s *Server) showStaffProducts(c *gin.Context, shop orders.Store, status int, n *views.Notice) {
	products, err := shop.Products(c.Request.Context())
	view := views.StaffProducts{Layout: s.layout(c)}
	for _, p := range products {
		view.Products = append(view.Products, views.StaffProduct{Product: p, Key: uuid.NewString()})
	}
	view.Notice = n
	s.show(c, err, status, "staff_products.html", view)
}

// staffRestock counts, receives or writes off a product's units on hand.
func (s *Server) staffRestock(c *gin.Context) {
	form := postForm(c)
	// Units that are no whole number stay -1, which the rule's range refuses.
	change := orders.StockChange{SKU: form.Get("sku"), Kind: cmp.Or(form.Get("change"), orders.Count), Reason: form.Get("reason"), Units: -1}
	if units, err := strconv.Atoi(strings.TrimSpace(form.Get("stock"))); err == nil {
		change.Units = units
	}
	p, err := s.shop.Restock(middleware.Tx(c), currentUser(c), change, s.deps.Now().UTC())
	var invalid *models.Error
	switch {
	case errors.Is(err, orders.ErrUnknownSKU):
		s.fail(c, models.ErrNotFound)
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		s.showStaffProducts(c, s.shop, http.StatusUnprocessableEntity, views.Problem(views.StockWords(invalid)))
	case err != nil:
		s.fail(c, err)
	default:
		s.showStaffProducts(c, orders.Store{DB: middleware.Tx(c)}, http.StatusOK, views.Restocked(p))
	}
}

// staffDoubtsPage lists every attempt and refund in doubt, oldest first.
func (s *Server) staffDoubtsPage(c *gin.Context) {
	doubts, err := s.shop.Doubts(c.Request.Context())
	view := views.StaffDoubts{Layout: s.layout(c)}
	if c.Query("asked") == stillInDoubt {
		view.Notice = views.StillInDoubt
	}
	for _, d := range doubts {
		view.Doubts = append(view.Doubts, views.StaffDoubt{Doubt: d, Age: views.AgeWords(s.deps.Now().Sub(d.CreatedAt)), Key: uuid.NewString()})
	}
	s.show(c, err, http.StatusOK, "staff_doubts.html", view)
}

// stillInDoubt is the flag (asked=) that the provider could not answer.
const stillInDoubt = "in-doubt"

// staffAskProvider resolves one request in doubt now, under the order's hold.
func (s *Server) staffAskProvider(c *gin.Context) {
	state, err := s.payments.ResolveNow(c.Request.Context(), currentUser(c), c.Param("kind"), c.Param("request_id"))
	switch {
	case err != nil:
		s.fail(c, err)
	case state == models.InDoubt:
		c.Redirect(http.StatusSeeOther, "/staff/in-doubt?asked="+stillInDoubt)
	default:
		c.Redirect(http.StatusSeeOther, "/staff/in-doubt")
	}
}
