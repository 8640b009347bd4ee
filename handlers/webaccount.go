package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// The browser's account pages: sign up, log in, log out, activity, password.

// credentialsPage is the sign-up or log-in page; signed in, on to next.
func (s *Server) credentialsPage(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		next := payments.LocalPath(c.Query("next"))
		if currentUser(c).ID != "" {
			c.Redirect(http.StatusSeeOther, next)
			return
		}
		s.renderPage(c, http.StatusOK, name, views.Credentials{Layout: s.layout(c), Next: next})
	}
}

// signedIn answers the sign-up or log-in form: signed in, or the form again (422).
func (s *Server) signedIn(c *gin.Context, page string, in credentials, user models.User, err error) {
	view := views.Credentials{Layout: s.layout(c), Email: in.Email, Next: payments.LocalPath(in.Next), Errors: map[string]string{}}
	var invalid *models.Error
	switch {
	case errors.Is(err, models.ErrEmailTaken):
		view.Notice = views.Problem(views.WordsOf(models.ErrEmailTaken).Text)
	case errors.Is(err, models.ErrBadCredentials):
		view.Notice = views.Problem(views.WordsOf(models.ErrBadCredentials).Text)
	case page == "signup.html" && errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		view.Notice = views.Problem("Please correct the fields below.")
		for _, f := range invalid.Fields {
			view.Errors[f.Field] = f.Message
		}
	case err != nil:
		s.fail(c, err)
		return
	}
	if view.Notice != nil {
		s.renderPage(c, http.StatusUnprocessableEntity, page, view)
		return
	}
	if err := s.startSession(c, user); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, view.Next)
}

// logout ends the session on the server: a copy of its cookie is worthless.
func (s *Server) logout(c *gin.Context) {
	if err := s.forgetSession(c); err != nil {
		s.fail(c, err)
		return
	}
	s.dropCookie(c)
	c.Redirect(http.StatusSeeOther, "/")
}

// accountPage is what the shop remembers of the forms sent (for developers: GET /api/v1/idempotency-keys).
func (s *Server) accountPage(c *gin.Context) {
	keys, err := s.idempotency.Keys(c.Request.Context(), currentUser(c).ID, 100)
	if err != nil {
		s.fail(c, err)
		return
	}
	traces, err := s.trail.TracesOf(c.Request.Context(), currentUser(c).ID, each(keys, middleware.DerivedKeyOf))
	s.show(c, err, http.StatusOK, "account.html", views.AccountOf(s.layout(c), keys, traces))
}

func (s *Server) passwordPage(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "password.html", views.Password{Layout: s.layout(c), Key: uuid.NewString()})
}

// changePassword ends every session and token of the user, and signs this
// browser in again. A form refused (422) keeps its key: nothing was stored.
func (s *Server) changePassword(c *gin.Context) {
	form := postForm(c)
	tx := func() *gorm.DB { return middleware.Tx(c) }
	change := accounts.PasswordChange{Current: form.Get("current_password"), New: form.Get("new_password"), Address: c.ClientIP(), Sessions: s.sessions}
	session, err := s.accounts.ChangePassword(c.Request.Context(), tx, currentUser(c), change, s.deps.Now())
	if err == nil {
		err = s.giveCookie(c, session)
	}
	view := views.Password{Layout: s.layout(c), Key: form.Get(middleware.FormKeyField), Errors: map[string]string{}}
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		view.Notice = views.Problem("Your password was not changed. Please correct the fields below.")
		for _, f := range invalid.Fields {
			view.Errors[f.Field] = f.Message
		}
		s.renderPage(c, http.StatusUnprocessableEntity, "password.html", view)
	case err != nil:
		s.fail(c, err)
	default:
		view.Changed = true
		view.Notice = &views.Notice{Kind: views.Success, Title: "Password changed.",
			Text: "Every other browser and app signed in to your account was signed out; this one was signed in again."}
		s.renderPage(c, http.StatusOK, "password.html", view)
	}
}

// authenticationPage is the simulated provider's 3-D Secure test page.
func (s *Server) authenticationPage(c *gin.Context) {
	auth, err := s.payments.Authentication(c.Request.Context(), c.Param("charge"))
	s.show(c, err, http.StatusOK, "authenticate.html", views.Authenticate{Layout: s.layout(c), Auth: auth,
		Action: payments.AuthPath + auth.ChargeID, ReturnURL: payments.LocalPath(c.Query("return_url"))})
}

// authenticate records the shopper's answer, once, and sends them back (303).
func (s *Server) authenticate(c *gin.Context) {
	outcome := postForm(c).Get("outcome")
	if outcome != "complete" && outcome != "fail" {
		s.fail(c, models.Invalid(models.FieldError{Field: "outcome", Message: "must be complete or fail"}))
		return
	}
	if _, err := s.payments.Authenticate(c.Request.Context(), c.Param("charge"), outcome == "complete"); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, payments.LocalPath(postForm(c).Get("return_url")))
}
