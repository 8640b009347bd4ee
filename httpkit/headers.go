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

// ReferencePolicy is the API reference's: Redoc styles its page inline and
// runs its search in a worker made from a blob.
const ReferencePolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"worker-src blob:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// SecurityHeaders sets unrolled/secure's headers on every answer: policy,
// nosniff, X-Frame-Options DENY and a Referrer-Policy that keeps paths in
// the shop. Without host and TLS checks, it never refuses a request.
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
