package httpkit

import (
	"github.com/gin-gonic/gin"
	"github.com/unrolled/secure"
)

// PagePolicy is every answer's Content-Security-Policy: scripts, styles,
// images and fetches from the shop itself, nothing inline, nothing in a
// frame, forms posted only here.
const PagePolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ReferencePolicy is the API reference's: Redoc (a script from 'self')
// styles its page inline and runs its search in a worker made from a blob
// (without either, TestAPIReferenceRendersInABrowser fails: it does not
// render, or the policy refuses its worker).
const ReferencePolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"worker-src blob:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// SecurityHeaders answers every request with the security headers of
// unrolled/secure for policy: the CSP, nosniff, X-Frame-Options DENY and a
// Referrer-Policy that keeps paths inside the shop. Its host and TLS checks
// are not configured, so it never refuses a request.
func SecurityHeaders(policy string) gin.HandlerFunc {
	headers := secure.New(secure.Options{
		ContentSecurityPolicy: policy,
		ContentTypeNosniff:    true,
		FrameDeny:             true,
		ReferrerPolicy:        "same-origin",
	})
	return func(c *gin.Context) {
		if err := headers.Process(c.Writer, c.Request); err != nil {
			c.Abort()
		}
	}
}
