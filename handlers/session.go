package handlers

import (
	"crypto/sha512"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/securecookie"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// The browser's session is a row on the server, named by a random token in
// one cookie: HttpOnly, SameSite=Lax, Secure when served over TLS. The
// server keeps only the token's hash, and ends the row at log-out, at a
// password change (every session of the user), after Deps.SessionIdle
// without a request and Deps.SessionMaxAge after log-in; a cookie copied
// before any of these is then worth nothing.
//
// The token is also signed with the session secret: a cookie that is not
// one of the shop's (forged, or signed with another secret) is refused
// without a database read, and SESSION_SECRET keeps its meaning. The
// signature is not what makes a session valid: the row is.
const (
	sessionCookie = "shop_session"
	sessionKey    = "shop.session"
)

type sessionValue struct {
	Token string `json:"sid"`
}

func newSessionCodec(secret []byte, maxAge time.Duration) *securecookie.SecureCookie {
	// A fixed-length signing key whatever the secret's length, separate from
	// any other use the secret might have.
	key := sha512.Sum512(append([]byte("shop session cookie\x00"), secret...))
	codec := securecookie.New(key[:], nil)
	codec.MaxAge(int(maxAge / time.Second))
	codec.SetSerializer(securecookie.JSONEncoder{})
	return codec
}

// startSession signs the user in with a new session: a new token at every
// log-in and sign-up, so that a token planted in the browser before (a
// session fixation) is never the one signed in. A session the browser had
// is ended.
func (s *Server) startSession(c *gin.Context, user models.User) error {
	if err := s.forgetSession(c); err != nil {
		return err
	}
	token, _, err := s.sessions.Start(c.Request.Context(), user.ID, s.deps.Now())
	if err != nil {
		return err
	}
	return s.giveCookie(c, token)
}

// giveCookie hands the browser the cookie of the session with this token.
func (s *Server) giveCookie(c *gin.Context, token string) error {
	value, err := s.cookies.Encode(sessionCookie, sessionValue{Token: token})
	if err != nil {
		return err
	}
	setCookie(c.Writer, s.secureCookies(c), sessionCookie, value, "/", int(s.deps.SessionMaxAge/time.Second))
	return nil
}

// secureCookies: over TLS, or always when configured so (in production,
// where TLS usually ends at a proxy and the request here is plain HTTP).
func (s *Server) secureCookies(c *gin.Context) bool {
	return c.Request.TLS != nil || s.deps.SecureCookies
}

// forgetSession ends the request's session, if it has one, on the server.
func (s *Server) forgetSession(c *gin.Context) error {
	session, ok := currentSession(c)
	if !ok {
		return nil
	}
	return s.sessions.End(c.Request.Context(), session.ID)
}

func (s *Server) dropCookie(c *gin.Context) {
	setCookie(c.Writer, s.secureCookies(c), sessionCookie, "", "/", -1)
}

// setCookie sets one of the shop's cookies (a negative maxAge deletes it):
// HttpOnly, SameSite=Lax, and Secure when secure.
func setCookie(w http.ResponseWriter, secure bool, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure})
}

// currentSession is the request's session, when it has one.
func currentSession(c *gin.Context) (accounts.Session, bool) {
	session, ok := c.Get(sessionKey)
	if !ok {
		return accounts.Session{}, false
	}
	return session.(accounts.Session), true
}

// loadSession marks the request as a page request and, when its session
// cookie names a session that still works, makes its user the current
// user: the scope of the idempotency keys of the browser's forms.
func (s *Server) loadSession(c *gin.Context) {
	c.Set(pageKey, true)
	cookie, err := c.Request.Cookie(sessionCookie)
	if err != nil {
		return
	}
	var value sessionValue
	if s.cookies.Decode(sessionCookie, cookie.Value, &value) != nil || value.Token == "" {
		return // forged, too old, signed with another secret or of an older release: signed out
	}
	session, err := s.sessions.Lookup(c.Request.Context(), value.Token, s.deps.Now())
	if errors.Is(err, accounts.ErrSessionEnded) {
		s.dropCookie(c)
		return
	}
	var user models.User
	if err == nil {
		user, err = s.accounts.UserByID(c.Request.Context(), session.UserID)
	}
	switch {
	case errors.Is(err, models.ErrNotFound):
		s.dropCookie(c)
	case err != nil:
		s.fail(c, err)
	default:
		c.Set(userKey, user)
		c.Set(sessionKey, session)
		actAs(c, audit.UserActor(user))
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
