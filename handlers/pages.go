package handlers

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
	"github.com/shop/shop/templates"
)

// pageKey marks a request of the browser's pages: its errors are rendered
// as HTML pages, not problem+json.
const pageKey = "shop.page"

func isPage(c *gin.Context) bool { return c.GetBool(pageKey) }

// layout is what base.html needs of every page.
type layout struct {
	Path string
	User models.User
}

func (s *Server) layout(c *gin.Context) layout {
	l := layout{User: currentUser(c)}
	if c.Request.Method == http.MethodGet {
		l.Path = c.Request.URL.Path // the current page, marked in the menu
	}
	return l
}

// parsePages builds the template cache: each page parsed once with the base
// layout, at start-up, so a broken template stops the server from starting.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templates.FS, "*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		if name == "base.html" || name == "problems.html" {
			continue
		}
		t, err := template.New(name).Funcs(pageFuncs).ParseFS(templates.FS, "base.html", name)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

var pageFuncs = template.FuncMap{
	"money":      money,
	"lineTotal":  func(unit int64, quantity int) int64 { return unit * int64(quantity) },
	"shortID":    func(id string) string { return id[:min(8, len(id))] },
	"shortKey":   func(key string) string { return truncate(key, 16) },
	"when":       func(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04 UTC") },
	"methodName": methodName,
}

func money(cents int64, currency string) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	amount := fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
	if currency == "USD" {
		return "$" + amount
	}
	return amount + " " + currency
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// paymentMethod is a choice of the pay form.
type paymentMethod struct{ Value, Label string }

var paymentMethods = []paymentMethod{
	{payments.MethodVisa, "Test Visa card (is charged)"},
	{payments.MethodDeclined, "Test card that is declined"},
	{payments.MethodUnavailable, "Test card whose provider is down"},
}

func methodName(value string) string {
	for _, m := range paymentMethods {
		if m.Value == value {
			return m.Label
		}
	}
	return value
}

// renderPage renders a page into a buffer first, so that a template error
// sends an error page instead of half a page.
func (s *Server) renderPage(c *gin.Context, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "base", data); err != nil {
		s.deps.Logger.Error("render page", "page", name, "err", err)
		c.Abort()
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("The page could not be shown; please try again."))
		return
	}
	// Not no-store: the back button should bring back the very page, with
	// the same form key, so that submitting it again replays its answer.
	c.Header("Cache-Control", "private, no-cache")
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// render is the one way a problem reaches the client: problem+json for the
// API, an HTML page that explains it for the browser.
func (s *Server) render(c *gin.Context, p *problem.Problem) {
	if !isPage(c) {
		problem.Write(c, p)
		return
	}
	if p.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	c.Abort()
	heading, explanation, links := explain(p)
	s.renderPage(c, p.Status, "error.html", errorView{layout: s.layout(c), Problem: p, Heading: heading, Explanation: explanation, Links: links})
}

type link struct{ Href, Text string }

type errorView struct {
	layout
	Problem     *problem.Problem
	Heading     string
	Explanation string
	Links       []link
}

var (
	linkShop   = link{"/", "Back to the catalog"}
	linkOrders = link{"/orders", "My orders"}
)

// explain says in a shopper's words what happened and where to go next.
func explain(p *problem.Problem) (heading, explanation string, links []link) {
	switch p.Type {
	case problem.KeyReused.URI():
		return "This form was already sent", "This form was already submitted with different contents. To be sure you are not charged for something you did not mean, nothing was done this time. Your first submission stands: check your orders, or start again from a fresh form.",
			[]link{linkOrders, linkShop}
	case problem.KeyInProgress.URI(), problem.KeyLeaseLost.URI():
		return "Still working on it", "Your earlier submission of this form is still being processed. Nothing was done twice. Wait a moment, then check your orders: it will be there.",
			[]link{linkOrders, linkShop}
	case problem.PaymentInProgress.URI():
		return "A payment is under way", "Another payment of this order is being processed right now. Wait a moment and look at the order again before paying.",
			[]link{linkOrders}
	case problem.ProviderUnavailable.URI():
		return "The payment did not go through", "The payment provider did not complete the payment. Go back and press Pay again: you will not be charged twice.",
			[]link{linkOrders}
	case problem.Unauthorized.URI():
		return "Please log in", "You need to be logged in for this.", []link{{"/login", "Log in"}, {"/signup", "Sign up"}}
	case problem.TooManyRequests.URI():
		return "Too many attempts", "There were too many attempts to sign up or log in. Wait a little, then try again.", []link{{"/login", "Log in"}, linkShop}
	case problem.CrossOrigin.URI():
		return "Refused: sent from another site", "This form was sent from another website, so the shop refused it.", []link{linkShop}
	case problem.NotFound.URI():
		return "Page not found", "There is no such page, or it belongs to another account.", []link{linkShop, linkOrders}
	case problem.TooLarge.URI(), problem.MalformedRequest.URI(), problem.KeyMissing.URI(), problem.KeyInvalid.URI():
		return "The form could not be read", "The form arrived damaged or incomplete, so nothing was done. Open the page again and resubmit it.", []link{linkShop}
	}
	return "Something went wrong", "Something went wrong on our side. Nothing was charged twice; please try again.", []link{linkShop, linkOrders}
}
