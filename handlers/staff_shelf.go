package handlers

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// The console's products, restocked as `shop stock` does, and its requests
// in doubt, each asked of the provider on demand.

func (s *Server) staffProductsPage(c *gin.Context) {
	s.showStaffProducts(c, s.shop, http.StatusOK, nil)
}

// showStaffProducts renders the products as shop reads them: after a
// restock, the operation's transaction, which holds the new count.
func (s *Server) showStaffProducts(c *gin.Context, shop orders.Store, status int, n *views.Notice) {
	products, err := shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.StaffProducts{Layout: s.layout(c)}
	for _, p := range products {
		view.Products = append(view.Products, views.StaffProduct{Product: p, Key: uuid.NewString()})
	}
	view.Notice = n
	s.renderPage(c, status, "staff_products.html", view)
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
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.StaffDoubts{Layout: s.layout(c)}
	if c.Query("asked") == stillInDoubt {
		view.Notice = views.StillInDoubt
	}
	for _, d := range doubts {
		view.Doubts = append(view.Doubts, views.StaffDoubt{Doubt: d, Age: views.AgeWords(s.deps.Now().Sub(d.CreatedAt)), Key: uuid.NewString()})
	}
	s.renderPage(c, http.StatusOK, "staff_doubts.html", view)
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
