package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// The browser's pages. Every render of a form embeds a fresh key in its
// hidden idempotency_key field; the same middleware as the API's makes a
// repeated submission of that form replay its first answer.

// catalogLine is one product of the checkout form, with what was typed.
type catalogLine struct {
	Product  models.Product
	Quantity string
	Error    string
}

type homeView struct {
	layout
	Key         string
	Lines       []catalogLine
	FormError   string
	MaxQuantity int
}

func (s *Server) home(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	lines := make([]catalogLine, len(products))
	for i, p := range products {
		lines[i] = catalogLine{Product: p, Quantity: "0"}
	}
	s.renderPage(c, http.StatusOK, "home.html", homeView{layout: s.layout(c), Key: uuid.NewString(), Lines: lines, MaxQuantity: models.MaxQuantity})
}

const qtyPrefix = "qty-"

// placeOrder turns the checkout form into one order. Invalid input gets the
// form back (422) with the same key: not stored, so the corrected form
// succeeds with it.
func (s *Server) placeOrder(c *gin.Context) {
	products, err := s.shop.Products(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	form := postForm(c)
	view := homeView{layout: s.layout(c), Key: form.Get(middleware.FormKeyField), MaxQuantity: models.MaxQuantity}
	var items []models.ItemInput
	invalid := false
	for _, p := range products {
		typed := strings.TrimSpace(form.Get(qtyPrefix + p.ID))
		line := catalogLine{Product: p, Quantity: typed}
		quantity, err := strconv.Atoi(typed)
		switch {
		case typed == "":
			line.Quantity = "0"
		case err != nil:
			line.Error = "Enter a whole number."
		case quantity < 0 || quantity > models.MaxQuantity:
			line.Error = "Enter a number from 0 to " + strconv.Itoa(models.MaxQuantity) + "."
		case quantity == 0: // "0", "00", "+0": none of this product
		default:
			items = append(items, models.ItemInput{ProductID: p.ID, Quantity: quantity})
		}
		invalid = invalid || line.Error != ""
		view.Lines = append(view.Lines, line)
	}
	switch {
	case unknownProducts(form, products):
		view.FormError = "The form lists a product that is no longer in the catalog. Check the quantities and place the order again."
	case invalid:
		view.FormError = "Some quantities are not valid; nothing was ordered."
	case len(items) == 0:
		view.FormError = "Choose a quantity for at least one product."
	}
	if view.FormError != "" {
		s.renderPage(c, http.StatusUnprocessableEntity, "home.html", view)
		return
	}
	order, err := s.shop.CreateOrder(middleware.Tx(c), currentUser(c).ID, middleware.DerivedKey(c), items)
	var invalidErr *models.Error
	if errors.As(err, &invalidErr) && invalidErr.Code == models.EINVALID {
		view.FormError = "The order could not be placed: " + fieldMessages(invalidErr)
		s.renderPage(c, http.StatusUnprocessableEntity, "home.html", view)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, orderPage(order.ID))
}

// postForm is the submitted form; the idempotency middleware has already
// read the body once, checked its size and found it a well-formed form.
func postForm(c *gin.Context) url.Values {
	_ = c.Request.ParseForm()
	return c.Request.PostForm
}

func unknownProducts(form url.Values, products []models.Product) bool {
	for field := range form {
		id, ok := strings.CutPrefix(field, qtyPrefix)
		if ok && !slices.ContainsFunc(products, func(p models.Product) bool { return p.ID == id }) {
			return true
		}
	}
	return false
}

func fieldMessages(e *models.Error) string {
	messages := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		messages = append(messages, f.Field+" "+f.Message)
	}
	return strings.Join(messages, "; ")
}

func orderPage(id string) string { return "/orders/" + id }

type ordersView struct {
	layout
	Orders []models.Order
	// Older links to the next page of orders; empty on the last.
	Older string
}

func (s *Server) ordersPage(c *gin.Context) {
	orders, next, limit, err := s.ordersPageOf(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := ordersView{layout: s.layout(c), Orders: orders}
	if next != nil {
		view.Older = nextURL(c, *next, limit)
	}
	s.renderPage(c, http.StatusOK, "orders.html", view)
}

type orderPageView struct {
	layout
	Order       models.Order
	Key         string
	Methods     []paymentMethod
	Method      string
	MethodError string
}

func (s *Server) orderPage(c *gin.Context) {
	order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.renderPage(c, http.StatusOK, "order.html", orderPageView{
		layout: s.layout(c), Order: order, Key: uuid.NewString(), Methods: paymentMethods, Method: payments.MethodVisa,
	})
}

// payOrder charges the order and goes back to the order page, which shows
// the outcome: paid, declined with the reason, or already paid by an
// earlier submission. A provider failure is an error page, not stored.
func (s *Server) payOrder(c *gin.Context) {
	form := postForm(c)
	method := form.Get("payment_method")
	if !slices.Contains(payments.Methods, method) {
		order, err := s.shop.Order(c.Request.Context(), currentUser(c).ID, c.Param("id"))
		if err != nil {
			s.fail(c, err)
			return
		}
		s.renderPage(c, http.StatusUnprocessableEntity, "order.html", orderPageView{
			layout: s.layout(c), Order: order, Key: form.Get(middleware.FormKeyField), Methods: paymentMethods,
			MethodError: "Choose how to pay.",
		})
		return
	}
	_, err := s.pay(c, c.Param("id"), method)
	if err != nil && !errors.Is(err, models.ErrOrderPaid) {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, orderPage(c.Param("id")))
}

type accountView struct {
	layout
	Email     string
	Next      string
	FormError string
	Errors    map[string]string
}

func (s *Server) signupPage(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "signup.html", accountView{layout: s.layout(c)})
}

// signup creates the account and signs it in. A second submission of the
// same form (a double-click) finds the account and, the password being
// right, signs in too instead of saying the email is taken.
func (s *Server) signup(c *gin.Context) {
	email, password := c.PostForm("email"), c.PostForm("password")
	user, err := s.accounts.SignUp(c.Request.Context(), email, password)
	if errors.Is(err, models.ErrEmailTaken) {
		if existing, loginErr := s.accounts.LogIn(c.Request.Context(), email, password); loginErr == nil {
			user, err = existing, nil
		}
	}
	view := accountView{layout: s.layout(c), Email: email, Errors: map[string]string{}}
	var invalid *models.Error
	switch {
	case errors.Is(err, models.ErrEmailTaken):
		view.FormError = "An account with this email already exists. Log in instead."
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		view.FormError = "Please correct the fields below."
		for _, f := range invalid.Fields {
			view.Errors[f.Field] = f.Message
		}
	case err != nil:
		s.fail(c, err)
		return
	}
	if view.FormError != "" {
		s.renderPage(c, http.StatusUnprocessableEntity, "signup.html", view)
		return
	}
	s.signIn(c, user, "/")
}

func (s *Server) loginPage(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "login.html", accountView{layout: s.layout(c), Next: localPath(c.Query("next"))})
}

func (s *Server) login(c *gin.Context) {
	email := c.PostForm("email")
	user, err := s.accounts.LogIn(c.Request.Context(), email, c.PostForm("password"))
	if errors.Is(err, models.ErrBadCredentials) {
		s.renderPage(c, http.StatusUnprocessableEntity, "login.html", accountView{
			layout: s.layout(c), Email: email, Next: localPath(c.PostForm("next")), FormError: "Wrong email or password.",
		})
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.signIn(c, user, localPath(c.PostForm("next")))
}

func (s *Server) signIn(c *gin.Context, user models.User, next string) {
	if err := s.startSession(c, user); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) logout(c *gin.Context) {
	s.endSession(c)
	c.Redirect(http.StatusSeeOther, "/")
}

type requestsView struct {
	layout
	Keys []keyJSON
}

// requestsPage shows the idempotency keys the server remembers for the user.
func (s *Server) requestsPage(c *gin.Context) {
	keys, err := s.recentKeys(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.renderPage(c, http.StatusOK, "requests.html", requestsView{layout: s.layout(c), Keys: keys})
}
