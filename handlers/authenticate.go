package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// The simulated provider's authentication page (3-D Secure), which the shop
// serves for it as a card issuer's test page: the shopper completes or
// fails the authentication, and goes back to the shop's return URL, where
// the order page asks the provider what they did. With Stripe, the page is
// Stripe's own, and this one answers 404.

type authenticateView struct {
	layout
	Auth              payments.Authentication
	Action, ReturnURL string
}

func (s *Server) authenticationPage(c *gin.Context) {
	auth, err := s.payments.Authentication(c.Request.Context(), c.Param("charge"))
	if err != nil {
		s.fail(c, err)
		return
	}
	view := authenticateView{layout: s.layout(c), Auth: auth, Action: payments.AuthPath + auth.ChargeID,
		ReturnURL: payments.LocalPath(c.Query("return_url"))}
	s.renderPage(c, http.StatusOK, "authenticate.html", view)
}

// authenticate records the shopper's answer at the provider, once, and
// sends them back to the shop (303), whichever button, however often.
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
