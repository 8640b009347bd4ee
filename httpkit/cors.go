package httpkit

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-contrib/cors"
	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
)

// What a page of an allowed origin may send to the API, and read of its
// answers. The methods are the API's own (TestCORSAllowsEveryAPIMethod).
// Content-Type is listed because application/json is not a value browsers
// send unasked; Content-Type itself, like the answers' other safelisted
// headers, needs no exposing.
var (
	CORSMethods        = []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	corsRequestHeaders = []string{"Authorization", "Content-Type", "Idempotency-Key", RequestIDHeader}
	corsExposedHeaders = []string{middleware.ReplayedHeader, "Retry-After", "Location", "Link", RequestIDHeader}
)

// corsMaxAge is how long a browser may keep a preflight's answer, so how
// long an origin taken off the list may go on sending requests.
const corsMaxAge = 10 * time.Minute

// CrossOriginAPI lets the pages of origins, and of no other, call the API
// mounted under prefix
// from a browser (gin-contrib/cors): it answers their preflights before any
// route's middleware sees them (a preflight carries neither token nor key)
// and marks the answers to them readable. Credentials mode stays off: the
// API takes bearer tokens, never cookies.
//
// A request from any other origin passes as if CORS were off: its answer
// carries no Access-Control-* header, so the browser keeps it from the
// page, and a preflight is answered 405, so the browser sends nothing. The
// allow-list is checked here first because the library would answer such
// a request 403 with an empty body, not a problem.
func CrossOriginAPI(prefix string, origins []string) gin.HandlerFunc {
	allow := cors.New(cors.Config{
		AllowOrigins:  origins,
		AllowMethods:  CORSMethods,
		AllowHeaders:  corsRequestHeaders,
		ExposeHeaders: corsExposedHeaders,
		MaxAge:        corsMaxAge,
	})
	return func(c *gin.Context) {
		if !strings.HasPrefix(c.Request.URL.Path, prefix+"/") {
			return
		}
		c.Writer.Header().Add("Vary", "Origin") // a cache must not hand one origin's answer to another
		if slices.Contains(origins, c.GetHeader("Origin")) {
			allow(c)
		}
	}
}
