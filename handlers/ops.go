package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

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
