// Package problem is the one way this service reports an error: an RFC 9457
// problem document whose type is a page the service itself serves.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// ContentType of every error answer of the JSON API.
const ContentType = "application/problem+json"

// Type is a kind of problem, documented at its URI.
type Type struct {
	Slug   string
	Status int
	Title  string
	Doc    string // on the type's page: when the problem happens, what a client should do
}

// documented is t with the words of its page.
func (t Type) documented(doc string) Type {
	t.Doc = doc
	return t
}

// URI is where the type is documented; relative, resolved against the request.
func (t Type) URI() string { return "/problems/" + t.Slug }

// With makes a problem of this type with the given detail, written as a
// sentence whatever its source (Go's errors begin in lower case). A 502 or
// 503 is transient: it says when to retry.
func (t Type) With(detail string) *Problem {
	p := &Problem{Type: t.URI(), Title: t.Title, Status: t.Status, Detail: sentence(detail)}
	if t.Status == http.StatusBadGateway || t.Status == http.StatusServiceUnavailable {
		p.RetryAfter = 1
	}
	return p
}

// sentence begins detail with a capital and ends it with a full stop.
func sentence(detail string) string {
	detail = strings.TrimSpace(detail)
	if detail == "" {
		return ""
	}
	first, size := utf8.DecodeRuneInString(detail)
	detail = string(unicode.ToUpper(first)) + detail[size:]
	if !strings.HasSuffix(detail, ".") && !strings.HasSuffix(detail, "?") && !strings.HasSuffix(detail, "!") {
		detail += "."
	}
	return detail
}

// Problem is an RFC 9457 problem document, with the extension members this
// service uses.
type Problem struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail,omitempty"`
	Errors  any    `json:"errors,omitempty"`  // a validation problem's invalid fields
	Payment any    `json:"payment,omitempty"` // a payment-declined problem's payment
	// RequestID is the X-Request-Id answered: a replay keeps the first request's.
	RequestID  string `json:"request_id,omitempty"`
	RetryAfter int    `json:"-"` // seconds, sent as Retry-After
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// Write sends p as application/problem+json and stops the handler chain.
func Write(c *gin.Context, p *Problem) {
	body, err := json.Marshal(p)
	if err != nil {
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	if p.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	c.Header("Cache-Control", "no-store")
	c.Abort()
	c.Data(p.Status, ContentType, body)
}
