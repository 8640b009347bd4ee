package handlers

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/problem"
)

// The browser's pages, and how they are rendered. Every form rendered embeds a
// fresh key (idempotency_key): the middleware replays its first answer to a repeat.

func (s *Server) home(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	view := views.Home{Layout: s.layout(c), Key: uuid.NewString(), MaxQuantity: orders.MaxQuantity, MaxPending: s.shop.MaxPending}
	for _, p := range products {
		view.Lines = append(view.Lines, views.CatalogLine{Product: p}) // empty, not "0": typing 2 must not give 20
	}
	s.show(c, err, http.StatusOK, "home.html", view)
}

const qtyPrefix = "qty-"

// checkoutForm reads the items ordered, and the form as typed, with why not.
func (s *Server) checkoutForm(c *gin.Context) (views.Home, []orders.ItemInput, error) {
	form := postForm(c)
	view := views.Home{Layout: s.layout(c), Key: form.Get(middleware.FormKeyField), MaxQuantity: orders.MaxQuantity, MaxPending: s.shop.MaxPending}
	// Through the operation's transaction, which already holds a connection.
	products, err := orders.Store{DB: middleware.Tx(c)}.Products(c.Request.Context())
	if err != nil {
		return view, nil, err
	}
	var items []orders.ItemInput
	invalid := false
	for _, p := range products {
		typed := strings.TrimSpace(form.Get(qtyPrefix + p.ID))
		line := views.CatalogLine{Product: p, Quantity: typed}
		quantity, err := strconv.Atoi(typed)
		switch {
		case typed == "":
		case err != nil:
			line.Error = "Enter a whole number."
		case quantity < 0 || quantity > orders.MaxQuantity:
			line.Error = "Enter a number from 0 to " + strconv.Itoa(orders.MaxQuantity) + "."
		case quantity > 0: // "0", "00", "+0": none of this product
			items = append(items, orders.ItemInput{ProductID: p.ID, Quantity: quantity})
		}
		invalid = invalid || line.Error != ""
		view.Lines = append(view.Lines, line)
	}
	switch {
	case unknownProducts(form, products):
		view.Notice = views.Problem("The form lists a product that is no longer in the catalog. Check the quantities and place the order again.")
	case invalid:
		view.Notice = views.Problem("Some quantities are not valid; nothing was ordered.")
	case len(items) == 0:
		view.Notice = views.Problem("Choose a quantity for at least one product.")
	}
	return view, items, nil
}

func unknownProducts(form map[string][]string, products []models.Product) bool {
	for field := range form {
		id, ok := strings.CutPrefix(field, qtyPrefix)
		if ok && !slices.ContainsFunc(products, func(p models.Product) bool { return p.ID == id }) {
			return true
		}
	}
	return false
}

// ordered answers the checkout form: invalid, it comes back (422) with the same
// key, nothing stored; short of stock (409), with what is left and a fresh key.
func (s *Server) ordered(c *gin.Context, form views.Home, order models.Order, err error) {
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Shortages != nil:
		for _, sh := range invalid.Shortages {
			for i, line := range form.Lines {
				if line.Product.ID == sh.ProductID {
					form.Lines[i].Product.Stock = sh.Left
					form.Lines[i].Error = "Only " + strconv.Itoa(sh.Left) + " left: you asked for " + strconv.Itoa(sh.Asked) + "."
					if sh.Left == 0 {
						form.Lines[i].Error = "Sold out: none left."
					}
				}
			}
		}
		form.Key = uuid.NewString()
		form.Notice = views.Problem(views.WordsOf(models.ErrOutOfStock).Text)
		s.renderPage(c, http.StatusConflict, "home.html", form)
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		// The catalog changed under the form: the details are the API's words.
		form.Notice = views.Problem("The order could not be placed as it is; nothing was ordered. Check the quantities and place the order again.")
		s.renderPage(c, http.StatusUnprocessableEntity, "home.html", form)
	case err != nil:
		s.fail(c, err)
	default:
		c.Redirect(http.StatusSeeOther, views.OrderPath(order.ID))
	}
}

func (s *Server) showOrder(c *gin.Context, order models.Order) {
	reqs, err := s.shop.RefundRequests(c.Request.Context(), order.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.Order{Layout: s.layout(c), Order: order, Key: uuid.NewString(), Methods: s.cards(), CancelKey: uuid.NewString(),
		Requests: reqs, RequestKey: uuid.NewString()}
	view.CanRequest = order.Charged() && order.Status != models.OrderRefunded &&
		!slices.ContainsFunc(reqs, func(r models.RefundRequest) bool { return r.State == models.RequestOpen })
	view.Notice = views.OrderOutcome(order, reqs, s.takeRepeat(c), s.deps.OrderExpiry)
	s.renderPage(c, http.StatusOK, "order.html", view)
}

// paid answers the pay form: the order page, or the provider's to authenticate.
func (s *Server) paid(c *gin.Context, payment models.Payment, err error) {
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Fields != nil && invalid.Fields[0].Field == methodField:
		// The pay form as sent, with its key: nothing was charged nor stored under it.
		s.refusedForm(c, http.StatusUnprocessableEntity, "Nothing was charged: choose a card to pay with, then press Pay.", func(view *views.Order, sent string) {
			view.Key, view.MethodError = sent, "Choose a card to pay with."
		})
	case errors.Is(err, models.ErrOrderPaid):
		s.did(c, nil, views.OrderPath(c.Param("id")), views.AlreadyPaid)
	case err != nil:
		s.fail(c, err)
	case payment.Status == models.RequiresAction:
		c.Redirect(http.StatusSeeOther, payment.NextActionURL)
	default:
		c.Redirect(http.StatusSeeOther, views.OrderPath(c.Param("id")))
	}
}

// refusedByOrder shows the order page again with the refused cancel form: with
// its key when nothing was stored under it, a fresh one after a final answer.
func (s *Server) refusedByOrder(c *gin.Context, err error) {
	p, words, final := s.answerOf(c, err)
	s.refusedForm(c, p.Status, words.Text, func(view *views.Order, sent string) {
		view.Key, view.CancelKey = uuid.NewString(), sent
		if final {
			view.CancelKey = uuid.NewString()
		}
	})
}

// refusedForm shows the order page again with a refused form, and why.
func (s *Server) refusedForm(c *gin.Context, status int, text string, keep func(view *views.Order, sent string)) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	view := views.Order{Layout: s.layout(c), Order: order, Methods: s.cards()}
	keep(&view, postForm(c).Get(middleware.FormKeyField))
	view.Notice = views.Problem(text)
	s.show(c, err, status, "order.html", view)
}

// receiptPage is a paid order's receipt, made to be printed.
func (s *Server) receiptPage(c *gin.Context) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	view := views.Receipt{Layout: s.layout(c), Order: order}
	for _, p := range order.Payments {
		if p.Status == models.Succeeded {
			view.Charges = append(view.Charges, p)
		}
	}
	if err == nil && len(view.Charges) == 0 {
		err = problem.NotFound.With("This order has no receipt yet: it is not paid.")
	}
	s.show(c, err, http.StatusOK, "receipt.html", view)
}

func (s *Server) layout(c *gin.Context) views.Layout {
	l := views.Layout{User: currentUser(c)}
	if c.Request.Method == http.MethodGet {
		l.Path = c.Request.URL.Path
	}
	return l
}

func (s *Server) cards() views.Cards {
	provider, cards := s.payments.TestCards()
	return views.Cards{Provider: provider, Cards: cards}
}

// renderPage renders into a buffer first: a template error never sends half a page.
func (s *Server) renderPage(c *gin.Context, status int, name string, data any) {
	page, err := s.pages.Render(name, data)
	if err != nil {
		s.deps.Logger.ErrorContext(c.Request.Context(), "render page", "page", name, "err", err)
		c.Abort()
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("The page could not be shown; please try again."))
		return
	}
	// Not no-store: the back button should bring back the very page, with
	// the same form key, so that submitting it again replays its answer.
	c.Header("Cache-Control", "private, no-cache")
	c.Data(status, "text/html; charset=utf-8", page)
}

// explain is an error page in the error's own words, with where to go next.
func explain(c *gin.Context, words views.Words) views.Error {
	shop, mine := views.Link{Href: "/", Text: "Back to the catalog"}, views.Link{Href: "/orders", Text: "My orders"}
	links := []views.Link{mine, shop}
	id := c.Param("id")
	switch user := currentUser(c); {
	case user.ID == "":
		links = []views.Link{{Href: "/login", Text: "Log in"}, {Href: "/signup", Text: "Sign up"}, shop}
	case strings.HasPrefix(c.FullPath(), "/staff/") && user.IsStaff():
		links = []views.Link{{Href: "/staff", Text: "All orders"}, {Href: "/staff/in-doubt", Text: "In doubt"}}
		if id != "" {
			links = append([]views.Link{{Href: views.ConsolePath(id), Text: "Back to the order"}}, links...)
		}
	case id != "" && strings.HasPrefix(c.FullPath(), "/orders/"):
		links = []views.Link{{Href: views.OrderPath(id), Text: "Back to your order"}, mine}
	}
	return views.Error{Heading: words.Heading, Links: links, Retry: retryOf(c, words.Retry),
		RequestID: httpkit.RequestIDOf(c.Request.Context())}
}

// retryOf is the failed form as it was sent, with a key, for an error that says to retry (label).
func retryOf(c *gin.Context, label string) *views.RetryForm {
	if label == "" || c.Request.Method != http.MethodPost || postForm(c).Get(middleware.FormKeyField) == "" {
		return nil
	}
	r := &views.RetryForm{Action: c.Request.URL.Path, Label: label}
	for name, values := range postForm(c) {
		for _, v := range values {
			r.Fields = append(r.Fields, views.Field{Name: name, Value: v})
		}
	}
	slices.SortStableFunc(r.Fields, func(a, b views.Field) int { return strings.Compare(a.Name, b.Name) })
	return r
}

// A replayed redirect of a form sent again carries a short-lived cookie
// naming the form, for the page to say so; nothing stored changes.
const repeatCookie = "shop_repeat"

func (s *Server) markRepeats(form string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Writer = &repeatMarker{ResponseWriter: c.Writer, form: form, secure: s.secureCookies(c)}
		c.Next()
	}
}

type repeatMarker struct {
	gin.ResponseWriter
	form   string
	secure bool
}

func (w *repeatMarker) WriteHeader(status int) {
	target := w.Header().Get("Location")
	page := strings.HasPrefix(strings.TrimPrefix(target, "/staff"), "/orders/") || strings.HasPrefix(target, deliveriesPage+"/")
	if status == http.StatusSeeOther && w.Header().Get(middleware.ReplayedHeader) == "true" && page {
		setCookie(w, w.secure, repeatCookie, w.form, target, 60)
	}
	w.ResponseWriter.WriteHeader(status)
}

// did answers a form that did act (a console act) or found it done
// (views.AlreadyPaid): back to page, named in that cookie for it to say so.
func (s *Server) did(c *gin.Context, err error, page, act string) {
	if err != nil {
		s.fail(c, err)
		return
	}
	setCookie(c.Writer, s.secureCookies(c), repeatCookie, act, page, 60)
	c.Redirect(http.StatusSeeOther, page)
}

// takeRepeat reads the page's repeat cookie and deletes it: the page says it once.
func (s *Server) takeRepeat(c *gin.Context) string {
	cookie, err := c.Request.Cookie(repeatCookie)
	if err != nil {
		return ""
	}
	setCookie(c.Writer, s.secureCookies(c), repeatCookie, "", c.Request.URL.Path, -1)
	return cookie.Value
}

// problemPage documents the idempotency policy and every problem type (at
// /problems), or one type; an unknown one is a 404 (problem+json unless HTML is accepted).
func (s *Server) problemPage(c *gin.Context) {
	view := views.Problems{Layout: s.layout(c), All: problem.All, Final: models.FinalTypes(), TTL: s.deps.TTL, Lease: s.deps.Lease, Wait: s.deps.Wait}
	for _, t := range problem.All {
		if t.Slug == c.Param("slug") {
			view.Type, view.Words = &t, views.ShopperWords[t.Slug]
		}
	}
	if view.Type == nil && c.Param("slug") != "" {
		c.Set(pageKey, strings.Contains(c.GetHeader("Accept"), "text/html"))
		s.fail(c, problem.NotFound.With("No such problem type."))
		return
	}
	s.renderPage(c, http.StatusOK, "problems.html", view)
}

func (s *Server) howItWorks(c *gin.Context) { s.renderPage(c, http.StatusOK, "how.html", s.layout(c)) }
