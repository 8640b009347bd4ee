package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// requireStaff lets only the shop's staff through, before the idempotency
// middleware, so that a refusal claims no key and writes nothing: anyone
// else is refused 403, and to them a page of the console does not exist
// (404).
func (s *Server) requireStaff(c *gin.Context) {
	switch {
	case currentUser(c).IsStaff():
	case isPage(c) && (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead):
		s.fail(c, problem.NotFound.With(""))
	default:
		s.fail(c, models.ErrForbidden)
	}
}

// staffLinks are where a console's error page leads: back to the order the
// form was about, or to the console's lists.
func staffLinks(c *gin.Context) []link {
	links := []link{{"/staff", "All orders"}, {"/staff/in-doubt", "In doubt"}}
	if id := c.Param("id"); id != "" {
		links = append([]link{{consolePath(id), "Back to the order"}}, links...)
	}
	return links
}

// consolePath is the console's page of an order.
func consolePath(orderID string) string { return "/staff/orders/" + orderID }
