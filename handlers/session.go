package handlers

import (
	"crypto/sha512"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/securecookie"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// The browser's session is one signed cookie naming the user: HttpOnly,
// SameSite=Lax, Secure when served over TLS. It is signed, not encrypted:
// it holds nothing secret, only what the server must be able to trust.
const (
	sessionCookie = "shop_session"
	sessionAge    = 14 * 24 * time.Hour
)

type sessionValue struct {
	UserID string `json:"uid"`
}

func newSessionCodec(secret []byte) *securecookie.SecureCookie {
	// A fixed-length signing key whatever the secret's length, separate from
	// any other use the secret might have.
	key := sha512.Sum512(append([]byte("shop session cookie\x00"), secret...))
	codec := securecookie.New(key[:], nil)
	codec.MaxAge(int(sessionAge / time.Second))
	codec.SetSerializer(securecookie.JSONEncoder{})
	return codec
}

func (s *Server) startSession(c *gin.Context, user models.User) error {
	value, err := s.sessions.Encode(sessionCookie, sessionValue{UserID: user.ID})
	if err != nil {
		return err
	}
	http.SetCookie(c.Writer, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/", MaxAge: int(sessionAge / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies(c),
	})
	return nil
}

// secureCookies: over TLS, or always when configured so (in production,
// where TLS usually ends at a proxy and the request here is plain HTTP).
func (s *Server) secureCookies(c *gin.Context) bool {
	return c.Request.TLS != nil || s.deps.SecureCookies
}

func (s *Server) endSession(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies(c),
	})
}

// loadSession marks the request as a page request and, when its session
// cookie is valid, makes its user the current user: the scope of the
// idempotency keys of the browser's forms.
func (s *Server) loadSession(c *gin.Context) {
	failAsPages(c)
	cookie, err := c.Request.Cookie(sessionCookie)
	if err != nil {
		return
	}
	var value sessionValue
	if s.sessions.Decode(sessionCookie, cookie.Value, &value) != nil {
		return // forged, expired, or signed with another secret: signed out
	}
	user, err := s.accounts.UserByID(c.Request.Context(), value.UserID)
	switch {
	case errors.Is(err, models.ErrNotFound):
		s.endSession(c)
	case err != nil:
		s.fail(c, err)
		c.Abort()
	default:
		c.Set(userKey, user)
	}
}

// requireSession sends a signed-out browser to the log-in page, and back
// here afterwards; a form posted without a session gets a page saying so.
func (s *Server) requireSession(c *gin.Context) {
	if currentUser(c).ID != "" {
		return
	}
	if c.Request.Method == http.MethodGet {
		c.Redirect(http.StatusSeeOther, "/login?next="+c.Request.URL.EscapedPath())
		c.Abort()
		return
	}
	s.fail(c, problem.Unauthorized.With("Your session has ended. Log in, then submit the form again."))
}

// refuseCrossOrigin refuses state-changing requests another site made the
// browser send (Go's CrossOriginProtection reads Sec-Fetch-Site and Origin).
func (s *Server) refuseCrossOrigin(c *gin.Context) {
	if err := s.crossOrigin.Check(c.Request); err != nil {
		s.fail(c, problem.CrossOrigin.With(""))
	}
}

// localPath is next when it is plainly a path on this site, and "/"
// otherwise, so that the log-in form cannot be made to redirect elsewhere.
// Browsers read a backslash as a slash and drop tabs and newlines, so
// "/\\evil" or "/\t/evil" would leave the site: anything unusual is refused.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsRune(next, '\\') || strings.IndexFunc(next, unicode.IsControl) >= 0 {
		return "/"
	}
	return next
}
