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

// credentialsPage is the sign-up or log-in page (name); it sends a shopper
// signed in already on to where they were going.
func (s *Server) credentialsPage(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		next := payments.LocalPath(c.Query("next"))
		if currentUser(c).ID != "" {
			c.Redirect(http.StatusSeeOther, next)
			return
		}
		s.renderPage(c, http.StatusOK, name, accountView{layout: s.layout(c), Next: next})
	}
}

// signedUp answers the sign-up form: signed in, or the form again (422)
// saying what to correct.
func (s *Server) signedUp(c *gin.Context, in credentials, user models.User, err error) {
	view := accountView{layout: s.layout(c), Email: in.Email, Next: payments.LocalPath(in.Next), Errors: map[string]string{}}
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
	s.signIn(c, user, view.Next)
}

// loggedIn answers the log-in form: signed in, or the form again (422).
func (s *Server) loggedIn(c *gin.Context, in credentials, user models.User, err error) {
	if errors.Is(err, models.ErrBadCredentials) {
		view := accountView{layout: s.layout(c), Email: in.Email, Next: payments.LocalPath(in.Next)}
		view.Notice = errorNotice(models.ErrBadCredentials.Shopper.Text)
		s.renderPage(c, http.StatusUnprocessableEntity, "login.html", view)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.signIn(c, user, payments.LocalPath(in.Next))
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
	if err := s.forgetSession(c); err != nil {
		s.fail(c, err)
		return
	}
	s.dropCookie(c)
	c.Redirect(http.StatusSeeOther, "/")
}

// howItWorks tells a shopper why sending a form twice is safe.
func (s *Server) howItWorks(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "how.html", s.layout(c))
}
