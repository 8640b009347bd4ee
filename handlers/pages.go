package handlers

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// layout is what base.html needs of every page.
type layout struct {
	Path string
	User models.User
	// Notice is the outcome the page opens with, right under its heading.
	Notice *notice
}

func (s *Server) layout(c *gin.Context) layout {
	l := layout{User: currentUser(c)}
	if c.Request.Method == http.MethodGet {
		l.Path = c.Request.URL.Path // the current page, marked in the menu
	}
	return l
}

// noticeKind says how a notice looks and how assistive technology hears it.
type noticeKind string

const (
	noticeSuccess noticeKind = "success"
	noticeInfo    noticeKind = "info"
	noticeError   noticeKind = "error"
)

// notice is an outcome in a shopper's words: a short title, what happened
// and what to do next, and Also, a second sentence some outcomes add (the
// form was sent twice).
type notice struct {
	Kind  noticeKind
	Title string
	Text  string
	Also  string
}

// Role is "alert" for a problem, read out at once, and "status" otherwise.
func (n notice) Role() string {
	if n.Kind == noticeError {
		return "alert"
	}
	return "status"
}

func errorNotice(text string) *notice { return &notice{Kind: noticeError, Text: text} }

// told is an error's words as a page opens with them.
func told(kind noticeKind, words models.Words, also string) *notice {
	return &notice{Kind: kind, Title: words.Heading + ".", Text: words.Text, Also: also}
}

// cardChoice is the pay form's choices: the provider's own test cards
// (the API accepts the older pm_card_declined too), and whose they are.
type cardChoice struct {
	Provider string
	Cards    []string
}

func (s *Server) cardChoice() cardChoice {
	provider, cards := s.payments.TestCards()
	return cardChoice{provider, cards}
}

// renderPage renders a page into a buffer first, so that a template error
// sends an error page instead of half a page.
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

type link struct{ Href, Text string }

// errorView is a problem told to a shopper: what happened, a button that
// sends the same form again when trying again is the answer, and where to
// go next, and the request's id to quote. It never shows a key, a status
// code or a route.
type errorView struct {
	layout
	Heading   string
	Retry     *retryForm
	Links     []link
	RequestID string
}

// retryForm sends the very form that failed again, its key included: the
// key was released, or its first submission is still running, so the
// retry either does the work once or gets the first answer.
type retryForm struct {
	Action string
	Fields []field
	Label  string
}

type field struct{ Name, Value string }

var (
	linkShop   = link{"/", "Back to the catalog"}
	linkOrders = link{"/orders", "My orders"}
)

// explain is an error page in a shopper's words: the error's own, with
// the button that sends the form again when that is the answer, and where
// to go next: back to the order the form was about, or, signed out, to log in.
func explain(c *gin.Context, words models.Words) errorView {
	links := []link{linkOrders, linkShop}
	if id := c.Param("id"); id != "" && strings.HasPrefix(c.FullPath(), "/orders/") {
		links = []link{{orderPage(id), "Back to your order"}, linkOrders}
	}
	if strings.HasPrefix(c.FullPath(), "/staff/") && currentUser(c).IsStaff() {
		links = staffLinks(c)
	}
	if currentUser(c).ID == "" {
		links = []link{{"/login", "Log in"}, {"/signup", "Sign up"}, linkShop}
	}
	view := errorView{Heading: words.Heading, Links: links, RequestID: httpkit.RequestIDOf(c.Request.Context())}
	if words.Retry != "" {
		view.Retry = retryOf(c, words.Retry)
	}
	return view
}

// retryOf is the failed form, to send again as it was; nil unless the
// request was one of the shop's forms with its one-time key.
func retryOf(c *gin.Context, label string) *retryForm {
	if c.Request.Method != http.MethodPost {
		return nil
	}
	form := postForm(c)
	if form.Get(middleware.FormKeyField) == "" {
		return nil
	}
	r := &retryForm{Action: c.Request.URL.Path, Label: label}
	for name, values := range form {
		for _, v := range values {
			r.Fields = append(r.Fields, field{name, v})
		}
	}
	slices.SortStableFunc(r.Fields, func(a, b field) int { return strings.Compare(a.Name, b.Name) })
	return r
}
