package handlers

import (
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
)

// CeilingPath is the one route NewCeilingServer adds to the shop's.
const CeilingPath = "/api/v1/load-ceiling"

// NewCeilingServer is for the load harness (tests/load) only: main never
// calls it, and no configuration reaches it. It builds the server NewServer
// builds, on the same engine, and adds one route, POST CeilingPath, behind
// the same bearer authentication as the API, which reads the request and
// answers status, header and body as given, and does nothing else. What it
// serves is the ceiling of this stack for an answer of that size: HTTP,
// Gin, the engine's middleware and authentication, with no idempotency and
// no business work. The harness measures replays against it.
func NewCeilingServer(deps Deps, status int, header http.Header, body []byte) *Server {
	s := NewServer(deps)
	s.router.POST(CeilingPath, s.requireBearer, func(c *gin.Context) {
		_, _ = io.Copy(io.Discard, c.Request.Body)
		for name, values := range header {
			c.Writer.Header()[name] = values
		}
		c.Data(status, header.Get("Content-Type"), body)
	})
	return s
}
