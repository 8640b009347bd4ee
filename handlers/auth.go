package handlers

import (
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

const userKey = "shop.user"

// requireBearer authenticates the API with a bearer token. It runs before
// the idempotency middleware: keys belong to the user it finds.
func (s *Server) requireBearer(c *gin.Context) {
	scheme, token, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		c.Header("WWW-Authenticate", `Bearer realm="shop"`)
		s.fail(c, problem.Unauthorized.With("Send Authorization: Bearer <token>."))
		return
	}
	user, err := s.accounts.UserByToken(c.Request.Context(), strings.TrimSpace(token))
	if err != nil {
		c.Header("WWW-Authenticate", `Bearer realm="shop", error="invalid_token"`)
		s.fail(c, err)
		return
	}
	c.Set(userKey, user)
}

// currentUser is the authenticated user; the zero User when there is none.
func currentUser(c *gin.Context) models.User {
	user, _ := c.Get(userKey)
	u, _ := user.(models.User)
	return u
}
