package httpkit

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-contrib/cors"
	"github.com/gin-gonic/gin"
	"github.com/unrolled/secure"

	"github.com/shop/shop/middleware"
)

// PagePolicy is every answer's Content-Security-Policy: scripts, styles,
// images and fetches from the shop itself, nothing inline, nothing in a
// frame, forms posted only here.
const PagePolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ReferencePolicy is the API reference's: Redoc styles its page inline and
// runs its search in a worker made from a blob.
const ReferencePolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"worker-src blob:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// SecurityHeaders sets policy, nosniff, X-Frame-Options DENY and a same-origin
// Referrer-Policy (unrolled/secure, with no host or TLS check: it never refuses).
// They are the same on every answer, so the library writes them once, here,
// and each answer is given them: its header map holds the same values, each
// a slice no Add can write into (an append copies it).
func SecurityHeaders(policy string) gin.HandlerFunc {
	fixed := headerOnly{}
	err := secure.New(secure.Options{
		ContentSecurityPolicy: policy,
		ContentTypeNosniff:    true,
		FrameDeny:             true,
		ReferrerPolicy:        "same-origin",
	}).Process(fixed, &http.Request{URL: &url.URL{Path: "/"}, Header: http.Header{}})
	if err != nil {
		panic("httpkit: the security headers refused a request: " + err.Error()) // no option here refuses
	}
	for name, values := range fixed {
		fixed[name] = slices.Clip(values)
	}
	return func(c *gin.Context) {
		h := c.Writer.Header()
		for name, values := range fixed {
			h[name] = values
		}
	}
}

// headerOnly is a response that keeps its header and nothing else.
type headerOnly http.Header

func (h headerOnly) Header() http.Header       { return http.Header(h) }
func (headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (headerOnly) WriteHeader(int)             {}

// What an allowed origin's page may send to the API (Content-Type: browsers
// do not send application/json unasked), and read of its answers.
var (
	CORSMethods        = []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	corsRequestHeaders = []string{"Authorization", "Content-Type", "Idempotency-Key", RequestIDHeader}
	corsExposedHeaders = []string{middleware.ReplayedHeader, "Retry-After", "Location", "Link", RequestIDHeader}
)

// corsMaxAge is how long a browser may keep a preflight's answer, so how
// long an origin taken off the list may go on sending requests.
const corsMaxAge = 10 * time.Minute

// CrossOriginAPI lets the pages of origins, and no other, call the API under
// prefix from a browser (gin-contrib/cors): preflights, which carry no token
// or key, are answered before any route. No credentials mode: the API takes
// bearer tokens. Any other origin passes as if CORS were off (a preflight
// gets the API's 405), not the library's empty 403.
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
