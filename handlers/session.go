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

// The browser's session is a row on the server (accounts.Sessions), named
// by a random token in one cookie, which ends at log-out, a password change,
// idle or past its age: a cookie copied before is then worth nothing. The
// token is also signed, so that a forged cookie is refused without a
// database read; the signature is not what makes a session valid: the row is.
const (
	sessionCookie = "shop_session"
	sessionKey    = "shop.session"
)

type sessionValue struct {
	Token string `json:"sid"`
}

func newSessionCodec(secret []byte, maxAge time.Duration) *securecookie.SecureCookie {
	// A fixed-length key, apart from the secret's other uses.
	key := sha512.Sum512(append([]byte("shop session cookie\x00"), secret...))
	codec := securecookie.New(key[:], nil)
	codec.MaxAge(int(maxAge / time.Second))
	codec.SetSerializer(securecookie.JSONEncoder{})
	return codec
}

// startSession signs the user in with a new token, never one planted in
// the browser before (a session fixation), and ends its former session.
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

func (s *Server) giveCookie(c *gin.Context, token string) error {
	value, err := s.cookies.Encode(sessionCookie, sessionValue{Token: token})
	if err != nil {
		return err
	}
	setCookie(c.Writer, s.secureCookies(c), sessionCookie, value, "/", int(s.deps.SessionMaxAge/time.Second))
	return nil
}

// secureCookies: over TLS, or always when configured so (TLS ending at a proxy).
func (s *Server) secureCookies(c *gin.Context) bool {
	return c.Request.TLS != nil || s.deps.SecureCookies
}

func (s *Server) forgetSession(c *gin.Context) error {
	if session, ok := c.Get(sessionKey); ok {
		return s.sessions.End(c.Request.Context(), session.(accounts.Session).ID)
	}
	return nil
}

func (s *Server) dropCookie(c *gin.Context) {
	setCookie(c.Writer, s.secureCookies(c), sessionCookie, "", "/", -1)
}

// setCookie sets one of the shop's cookies (a negative maxAge deletes it).
func setCookie(w http.ResponseWriter, secure bool, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure})
}

// loadSession marks the request as a page's and, when its cookie names a
// live session, makes its user the current user: the forms' keys' scope.
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

// requireSession sends a signed-out browser to log in, and back here after.
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

// refuseCrossOrigin refuses writes another site made the browser send.
func (s *Server) refuseCrossOrigin(c *gin.Context) {
	if err := s.crossOrigin.Check(c.Request); err != nil {
		s.fail(c, problem.CrossOrigin.With(""))
	}
}
