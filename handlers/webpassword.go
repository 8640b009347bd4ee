package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// The account's Change password form. Like every form, each render carries
// a fresh key: a double-click changes the password once and replays the
// answer, without its cookie (docs/idempotency.md). The change ends every
// session of the user and revokes their bearer tokens; this browser is
// signed in again, with a new session.

type passwordView struct {
	layout
	Key     string
	Changed bool
	Errors  map[string]string
}

func (s *Server) passwordPage(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "password.html", passwordView{layout: s.layout(c), Key: uuid.NewString()})
}

// changePassword changes the password. A wrong current password or a new
// one that breaks the rules gets the form again (422) with the same key:
// nothing is stored under it, so the corrected form runs with it. Wrong
// current passwords count as failed log-ins (accounts.PasswordChange).
func (s *Server) changePassword(c *gin.Context) {
	form := postForm(c)
	tx := func() *gorm.DB { return middleware.Tx(c) }
	change := accounts.PasswordChange{Current: form.Get("current_password"), New: form.Get("new_password"), Address: c.ClientIP(), Sessions: s.sessions}
	session, err := s.accounts.ChangePassword(c.Request.Context(), tx, currentUser(c), change, s.deps.Now())
	if err == nil {
		err = s.giveCookie(c, session)
	}
	view := passwordView{layout: s.layout(c), Key: form.Get(middleware.FormKeyField), Errors: map[string]string{}}
	var invalid *models.Error
	switch {
	case errors.As(err, &invalid) && invalid.Code == models.EINVALID:
		view.Notice = errorNotice("Your password was not changed. Please correct the fields below.")
		for _, f := range invalid.Fields {
			view.Errors[f.Field] = f.Message
		}
		s.renderPage(c, http.StatusUnprocessableEntity, "password.html", view)
	case err != nil:
		s.fail(c, err)
	default:
		view.Changed = true
		view.Notice = &notice{Kind: noticeSuccess, Title: "Password changed.",
			Text: "Every other browser and app signed in to your account was signed out; this one was signed in again."}
		s.renderPage(c, http.StatusOK, "password.html", view)
	}
}
