package handlers

import (
	"github.com/gin-gonic/gin"
)

// throttleAddress refuses a credential request (sign-up and log-in, each a
// deliberately slow bcrypt) from an address that sent too many this
// minute, counted in the database across every instance: 429 with
// Retry-After, a page for the browser. The address is the connection's
// peer, never a header the client chooses.
func (s *Server) throttleAddress(c *gin.Context) {
	if s.addresses == nil {
		return
	}
	if err := s.addresses.Take(c.Request.Context(), c.ClientIP()); err != nil {
		s.fail(c, err)
	}
}
