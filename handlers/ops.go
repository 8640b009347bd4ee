package handlers

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// problemIndex documents the idempotency policy and every problem type: the
// API's reference, in the site's layout.
func (s *Server) problemIndex(c *gin.Context) { s.problemDoc(c, nil) }

// problemPage documents one problem type. An unknown one is a 404: a page
// for a browser, problem+json for an API client.
func (s *Server) problemPage(c *gin.Context) {
	for _, t := range problem.All {
		if t.Slug == c.Param("slug") {
			s.problemDoc(c, &t)
			return
		}
	}
	if !acceptsHTML(c) {
		failAsProblems(c)
	}
	s.fail(c, problem.NotFound.With("No such problem type."))
}

func acceptsHTML(c *gin.Context) bool { return strings.Contains(c.GetHeader("Accept"), "text/html") }

type problemDocView struct {
	layout
	Type *problem.Type
	// Error is the error declared for Type, if any: how a shopper is told it.
	Error            *models.Error
	All, Final       []problem.Type
	TTL, Lease, Wait time.Duration
}

// IsFinal says whether the page's type is a final answer.
func (v problemDocView) IsFinal() bool { return v.Type != nil && slices.Contains(v.Final, *v.Type) }

func (s *Server) problemDoc(c *gin.Context, t *problem.Type) {
	view := problemDocView{
		layout: s.layout(c), Type: t, All: problem.All, Final: models.FinalTypes(), TTL: s.deps.TTL, Lease: s.deps.Lease, Wait: s.deps.Wait,
	}
	if t != nil {
		view.Error = models.Declared(t.URI())
	}
	s.renderPage(c, http.StatusOK, "problems.html", view)
}
