package handlers

import (
	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/problem"
)

// refuse renders a refusal of the idempotency middleware as any other
// problem of the shop: problem+json for the API, a page for the browser.
// Each refusal is one of the shop's problem types, of the same slug, status
// and title (TestEveryRefusalIsAProblemTypeOfTheShop), with its page at
// /problems.
func (s *Server) refuse(c *gin.Context, r middleware.Refusal) {
	p := problem.Type{Slug: r.Type, Status: r.Status, Title: r.Title}.With(r.Detail)
	p.RetryAfter = r.RetryAfter
	s.render(c, p)
}
