package handlers

import (
	"context"
	"crypto/sha512"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/securecookie"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

const (
	userKey  = "shop.user"
	tokenKey = "shop.token"
)

// requireBearer authenticates the API, before the middleware: keys belong
// to the user it finds.
func (s *Server) requireBearer(c *gin.Context) {
	scheme, token, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		c.Header("WWW-Authenticate", `Bearer realm="shop"`)
		s.fail(c, problem.Unauthorized.With("Send Authorization: Bearer <token>."))
		return
	}
	t, user, err := s.accounts.TokenUser(c.Request.Context(), strings.TrimSpace(token), s.deps.Now())
	if err != nil {
		c.Header("WWW-Authenticate", `Bearer realm="shop", error="invalid_token"`)
		s.fail(c, err)
		return
	}
	c.Set(userKey, user)
	c.Set(tokenKey, t)
	actAs(c, audit.UserActor(user))
}

// actAs has the request's acts audited as a's: the user its authentication found.
func actAs(c *gin.Context, a audit.Actor) {
	c.Request = c.Request.WithContext(audit.WithActor(c.Request.Context(), a))
}

// currentUser is the authenticated user; the zero User when there is none.
func currentUser(c *gin.Context) models.User {
	user, _ := c.Get(userKey)
	u, _ := user.(models.User)
	return u
}

func (s *Server) me(c *gin.Context) {
	u, t := currentUser(c), c.MustGet(tokenKey).(models.APIToken)
	c.JSON(http.StatusOK, gin.H{"id": u.ID, "email": u.Email, "token_expires_at": t.ExpiresAt.UTC()})
}

// revokeToken ends the request's bearer token: at once here, within
// TokenCacheTTL on the other instances. Detached: a client gone after the
// commit must not keep its token alive in this instance's cache.
func (s *Server) revokeToken(c *gin.Context) {
	token := c.MustGet(tokenKey).(models.APIToken)
	if err := s.accounts.RevokeToken(context.WithoutCancel(c.Request.Context()), token, s.deps.Now().UTC()); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

type credentials struct {
	Email    string `json:"email" form:"email"`
	Password string `json:"password" form:"password"`
	Next     string `json:"-" form:"next"` // where the browser goes once signed in
}

// createUser signs up; the same form sent again (a double-click) finds the
// account and, the password being right, signs in too.
func (s *Server) createUser(c *gin.Context) {
	var in credentials
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	user, err := s.accounts.SignUp(c.Request.Context(), in.Email, in.Password)
	if isPage(c) && errors.Is(err, models.ErrEmailTaken) {
		if existing, loginErr := s.accounts.LogIn(c.Request.Context(), in.Email, in.Password, c.ClientIP()); loginErr == nil {
			user, err = existing, nil
		}
	}
	if isPage(c) {
		s.signedIn(c, "signup.html", in, user, err)
		return
	}
	s.reply(c, err, http.StatusCreated, gin.H{"id": user.ID, "email": user.Email})
}

// createToken logs in: the API gets a bearer token, the browser a session.
func (s *Server) createToken(c *gin.Context) {
	var in credentials
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	user, err := s.accounts.LogIn(c.Request.Context(), in.Email, in.Password, c.ClientIP())
	if isPage(c) {
		s.signedIn(c, "login.html", in, user, err)
		return
	}
	expires := s.deps.Now().UTC().Add(s.deps.TokenTTL).Truncate(time.Second)
	var token string
	if err == nil {
		token, err = s.accounts.IssueToken(c.Request.Context(), user, expires)
	}
	c.Header("Cache-Control", "no-store")
	s.reply(c, err, http.StatusCreated, gin.H{"token": token, "token_type": "Bearer", "expires_at": expires})
}

// throttleAddress refuses a sign-up or log-in (a slow bcrypt each) from an
// address, the connection's peer, that sent too many this minute: 429.
func (s *Server) throttleAddress(c *gin.Context) {
	if s.addresses == nil {
		return
	}
	if err := s.addresses.Take(c.Request.Context(), c.ClientIP()); err != nil {
		s.fail(c, err)
	}
}

// The browser's session is a row on the server (accounts.Sessions), named by a
// random token in one cookie: ended (log-out, password change, idle, age), a
// copied cookie is worth nothing. The token is signed only so that a forged
// cookie is refused without a database read: the row is what makes it valid.
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
	var user models.User
	if err == nil {
		user, err = s.accounts.UserByID(c.Request.Context(), session.UserID)
	}
	switch {
	case errors.Is(err, accounts.ErrSessionEnded), errors.Is(err, models.ErrNotFound):
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
	switch {
	case currentUser(c).ID != "":
	case c.Request.Method == http.MethodGet:
		c.Redirect(http.StatusSeeOther, "/login?next="+c.Request.URL.EscapedPath())
		c.Abort()
	default:
		s.fail(c, problem.Unauthorized.With("Your session has ended. Log in, then submit the form again."))
	}
}

// refuseCrossOrigin refuses writes another site made the browser send.
func (s *Server) refuseCrossOrigin(c *gin.Context) {
	if err := s.crossOrigin.Check(c.Request); err != nil {
		s.fail(c, problem.CrossOrigin.With(""))
	}
}
