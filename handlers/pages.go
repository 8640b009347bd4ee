package handlers

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

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

// explain is an error page in the error's own words, with where to go next.
func explain(c *gin.Context, words models.Words) views.Error {
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
	view := views.Error{Heading: words.Heading, Links: links, RequestID: httpkit.RequestIDOf(c.Request.Context())}
	if words.Retry != "" {
		view.Retry = retryOf(c, words.Retry)
	}
	return view
}

// retryOf is the failed form as it was sent, if it was one with a key.
func retryOf(c *gin.Context, label string) *views.RetryForm {
	if c.Request.Method != http.MethodPost || postForm(c).Get(middleware.FormKeyField) == "" {
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

// A form sent more than once gets its first answer replayed: the same
// redirect. So that the page can say so, the replayed redirect carries a
// short-lived cookie naming the form, made afresh: nothing stored changes.
const repeatCookie = "shop_repeat"

// markRepeats goes in front of the idempotency middleware on a form's route.
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

// markPage names in that cookie what a form's first answer found
// (views.AlreadyPaid) or did (a console act), for the page at path.
func (s *Server) markPage(c *gin.Context, path, what string) {
	setCookie(c.Writer, s.secureCookies(c), repeatCookie, what, path, 60)
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
// /problems), or one type. An unknown one is a 404: a page for a browser,
// problem+json for an API client.
func (s *Server) problemPage(c *gin.Context) {
	view := views.Problems{Layout: s.layout(c), All: problem.All, Final: models.FinalTypes(), TTL: s.deps.TTL, Lease: s.deps.Lease, Wait: s.deps.Wait}
	for _, t := range problem.All {
		if t.Slug == c.Param("slug") {
			view.Type, view.Error = &t, models.Declared(t.URI())
		}
	}
	if view.Type == nil && c.Param("slug") != "" {
		c.Set(pageKey, strings.Contains(c.GetHeader("Accept"), "text/html"))
		s.fail(c, problem.NotFound.With("No such problem type."))
		return
	}
	s.renderPage(c, http.StatusOK, "problems.html", view)
}

// howItWorks tells a shopper why sending a form twice is safe.
func (s *Server) howItWorks(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "how.html", s.layout(c))
}
