package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
)

// A form sent more than once (a double-click, the back button, a refresh)
// gets its first answer replayed: the same redirect to the same order page.
// So that the page can say so, the replayed redirect also carries a
// short-lived cookie for that page, naming the form. It is made afresh for
// this answer; nothing stored with the key is changed or replayed.
const (
	repeatCookie    = "shop_repeat"
	repeatedOrder   = "order"
	repeatedPayment = "payment"
	repeatedCancel  = "cancel"
)

// markRepeats goes in front of the idempotency middleware on a form's route.
func (s *Server) markRepeats(form string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Writer = &repeatMarker{ResponseWriter: c.Writer, form: form, secure: s.secureCookies(c)}
		c.Next()
	}
}

type repeatMarker struct {
	gin.ResponseWriter
	form   string
	secure bool
}

func (w *repeatMarker) WriteHeader(status int) {
	target := w.Header().Get("Location")
	page := strings.HasPrefix(strings.TrimPrefix(target, "/staff"), "/orders/") || strings.HasPrefix(target, deliveriesPage+"/")
	if status == http.StatusSeeOther && w.Header().Get(middleware.ReplayedHeader) == "true" && page {
		setCookie(w, w.secure, repeatCookie, w.form, target, 60)
	}
	w.ResponseWriter.WriteHeader(status)
}

// alreadyPaid names, in the same cookie, a payment form that found its
// order already paid by another (another tab or window): the card it chose
// was not charged. Only the first answer sets it; a replay of that form is
// a repeat like any other.
const alreadyPaid = "already-paid"

// markPage names in the same cookie what the first answer of a form found
// (alreadyPaid) or did (a console act), for the page at path to tell.
func (s *Server) markPage(c *gin.Context, path, what string) {
	setCookie(c.Writer, s.secureCookies(c), repeatCookie, what, path, 60)
}

// takeRepeat reads the order page's repeat cookie, if any, and deletes it:
// the page says it once.
func (s *Server) takeRepeat(c *gin.Context) string {
	cookie, err := c.Request.Cookie(repeatCookie)
	if err != nil {
		return ""
	}
	setCookie(c.Writer, s.secureCookies(c), repeatCookie, "", c.Request.URL.Path, -1)
	return cookie.Value
}
