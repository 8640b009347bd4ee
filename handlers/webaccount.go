package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// The browser's account pages: sign up, log in, log out (the password's
// page is webpassword.go).

type accountView struct {
	layout
	Email  string
	Next   string
	Errors map[string]string
}

func (s *Server) signupPage(c *gin.Context) {
	if s.signedInAlready(c) {
		return
	}
	s.renderPage(c, http.StatusOK, "signup.html", accountView{layout: s.layout(c), Next: payments.LocalPath(c.Query("next"))})
}

// signedInAlready sends a signed-in shopper on from the sign-up and log-in
// pages, to where they were going.
func (s *Server) signedInAlready(c *gin.Context) bool {
	if currentUser(c).ID == "" {
		return false
	}
	c.Redirect(http.StatusSeeOther, payments.LocalPath(c.Query("next")))
	return true
}

// signup creates the account and signs it in. A second submission of the
// same form (a double-click) finds the account and, the password being
// right, signs in too instead of saying the email is taken.
func (s *Server) signup(c *gin.Context) {
	email, password := postForm(c).Get("email"), postForm(c).Get("password")
	user, err := s.accounts.SignUp(c.Request.Context(), email, password)
	if errors.Is(err, models.ErrEmailTaken) {
		if existing, loginErr := s.accounts.LogIn(c.Request.Context(), email, password, c.ClientIP()); loginErr == nil {
			user, err = existing, nil
		}
	}
	next := payments.LocalPath(postForm(c).Get("next"))
	view := accountView{layout: s.layout(c), Email: email, Next: next, Errors: map[string]string{}}
	var invalid *models.Error
	switch {
	case errors.Is(err, models.ErrEmailTaken):
		view.Notice = errorNotice(models.ErrEmailTaken.Shopper.Text)
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		view.Notice = errorNotice("Please correct the fields below.")
		for _, f := range invalid.Fields {
			view.Errors[f.Field] = f.Message
		}
	case err != nil:
		s.fail(c, err)
		return
	}
	if view.Notice != nil {
		s.renderPage(c, http.StatusUnprocessableEntity, "signup.html", view)
		return
	}
	s.signIn(c, user, next)
}

func (s *Server) loginPage(c *gin.Context) {
	if s.signedInAlready(c) {
		return
	}
	s.renderPage(c, http.StatusOK, "login.html", accountView{layout: s.layout(c), Next: payments.LocalPath(c.Query("next"))})
}

func (s *Server) login(c *gin.Context) {
	email := postForm(c).Get("email")
	user, err := s.accounts.LogIn(c.Request.Context(), email, postForm(c).Get("password"), c.ClientIP())
	if errors.Is(err, models.ErrBadCredentials) {
		view := accountView{layout: s.layout(c), Email: email, Next: payments.LocalPath(postForm(c).Get("next"))}
		view.Notice = errorNotice(models.ErrBadCredentials.Shopper.Text)
		s.renderPage(c, http.StatusUnprocessableEntity, "login.html", view)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.signIn(c, user, payments.LocalPath(postForm(c).Get("next")))
}

func (s *Server) signIn(c *gin.Context, user models.User, next string) {
	if err := s.startSession(c, user); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, next)
}

// logout ends the session on the server, not only in this browser: a copy
// of its cookie signs no one in afterwards.
func (s *Server) logout(c *gin.Context) {
	if err := s.endSession(c); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/")
}

// howItWorks tells a shopper why sending a form twice is safe.
func (s *Server) howItWorks(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "how.html", s.layout(c))
}
