package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

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
// TokenCacheTTL on the other instances.
func (s *Server) revokeToken(c *gin.Context) {
	// Detached: a client gone after the revocation committed must not keep
	// its token alive in this instance's cache.
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

// createUser signs up: the API answers the account, the browser is signed
// in. A second submission of the form (a double-click) finds the account
// and, the password being right, signs in too.
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
	switch {
	case isPage(c):
		s.signedIn(c, "signup.html", in, user, err)
	case err != nil:
		s.fail(c, err)
	default:
		c.JSON(http.StatusCreated, gin.H{"id": user.ID, "email": user.Email})
	}
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
	if err != nil {
		s.fail(c, err)
		return
	}
	expires := s.deps.Now().UTC().Add(s.deps.TokenTTL).Truncate(time.Second)
	token, err := s.accounts.IssueToken(c.Request.Context(), user, expires)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, gin.H{"token": token, "token_type": "Bearer", "expires_at": expires})
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
