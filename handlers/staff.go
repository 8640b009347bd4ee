package handlers

import (
	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
)

// requireStaff lets only the shop's staff through: anyone else is refused
// 403 forbidden. It goes before the idempotency middleware, so a refusal
// claims no key and writes nothing.
func (s *Server) requireStaff(c *gin.Context) {
	if !currentUser(c).IsStaff() {
		s.fail(c, models.ErrForbidden)
	}
}
