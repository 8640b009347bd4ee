package handlers

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// The console's products, counted, received and written off as `shop
// stock` does, and its requests in doubt, each asked of the provider on
// demand.

type staffProduct struct {
	models.Product
	Key string
}

type staffProductsView struct {
	layout
	Products []staffProduct
}

func (s *Server) staffProductsPage(c *gin.Context) {
	s.showStaffProducts(c, s.shop, http.StatusOK, nil)
}

// showStaffProducts renders the products as shop reads them: after a
// restock, through the operation's transaction, which holds the new count.
func (s *Server) showStaffProducts(c *gin.Context, shop orders.Store, status int, n *notice) {
	products, err := shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	view := staffProductsView{layout: s.layout(c)}
	for _, p := range products {
		view.Products = append(view.Products, staffProduct{Product: p, Key: uuid.NewString()})
	}
	view.Notice = n
	s.renderPage(c, status, "staff_products.html", view)
}

// staffRestock makes the change of a product's units on hand the form
// says (a count, units received or written off), in the operation's
// transaction.
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
		err = models.ErrNotFound
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		s.showStaffProducts(c, s.shop, http.StatusUnprocessableEntity, errorNotice(stockWords(invalid)))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.showStaffProducts(c, orders.Store{DB: middleware.Tx(c)}, http.StatusOK, &notice{Kind: noticeSuccess, Title: "Restocked.",
		Text: fmt.Sprintf("%s: %s on hand. %d held by unpaid orders, %d for sale.", p.Name, unitWords(p.OnHand()), p.Held, p.Stock)})
}

func unitWords(n int) string {
	if n == 1 {
		return "1 unit"
	}
	return strconv.Itoa(n) + " units"
}

type staffDoubt struct {
	orders.Doubt
	Age, Key string
}

type staffDoubtsView struct {
	layout
	Doubts []staffDoubt
}

// staffDoubtsPage lists every payment attempt and refund in doubt, oldest
// first, with its age and a button that asks the provider now.
func (s *Server) staffDoubtsPage(c *gin.Context) {
	doubts, err := s.shop.Doubts(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	view := staffDoubtsView{layout: s.layout(c)}
	if c.Query("asked") == stillInDoubt {
		view.Notice = &notice{Kind: noticeInfo, Title: "Still in doubt.", Text: "The provider could not say what became of the request; it is still in doubt. Ask again later."}
	}
	for _, d := range doubts {
		view.Doubts = append(view.Doubts, staffDoubt{Doubt: d, Age: ageWords(s.deps.Now().Sub(d.CreatedAt)), Key: uuid.NewString()})
	}
	s.renderPage(c, http.StatusOK, "staff_doubts.html", view)
}

// stillInDoubt is the in-doubt page's query flag (asked=) that tells the
// provider could not answer.
const stillInDoubt = "in-doubt"

// staffAskProvider resolves one request in doubt now, through the
// protocol's resolution under the order's hold, then lists what is left,
// saying so when the provider could not answer.
func (s *Server) staffAskProvider(c *gin.Context) {
	state, err := s.payments.ResolveNow(c.Request.Context(), currentUser(c), c.Param("kind"), c.Param("request_id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if state == models.InDoubt {
		c.Redirect(http.StatusSeeOther, "/staff/in-doubt?asked="+stillInDoubt)
		return
	}
	c.Redirect(http.StatusSeeOther, "/staff/in-doubt")
}

// ageWords is how old something is, in words: "under a minute", "5
// minutes", "3 hours", "2 days".
func ageWords(d time.Duration) string {
	for _, u := range []struct {
		name string
		size time.Duration
	}{{"day", 24 * time.Hour}, {"hour", time.Hour}, {"minute", time.Minute}} {
		if n := int64(d / u.size); n == 1 {
			return "1 " + u.name
		} else if n > 1 {
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return "under a minute"
}
