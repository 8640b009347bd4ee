package handlers

import (
	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// refuse renders a refusal of the idempotency middleware as any other
// problem of the shop: problem+json for the API, a page for the browser.
// Each refusal is one of the shop's problem types, of the same slug, status
// and title (TestEveryRefusalIsAProblemTypeOfTheShop), with its page at
// /problems.
func (s *Server) refuse(c *gin.Context, r middleware.Refusal) {
	if r.Cause != nil && unreachable(r.Cause) {
		s.fail(c, r.Cause) // a database out of reach: 503, told as every handler's is
		return
	}
	p := problem.Type{Slug: r.Type, Status: r.Status, Title: r.Title}.With(r.Detail)
	p.RetryAfter = r.RetryAfter
	s.fail(c, p)
}

// The refusals of the idempotency middleware and of the handlers
// themselves, declared as the domain declares its errors, so that a shopper
// is told every problem type by the one error declared for it. A type
// declared nowhere is told as Internal is.
func init() {
	for _, e := range []*models.Error{
		{Type: problem.KeyReused, Shopper: models.Words{Heading: "This form was already sent",
			Text: "This form was already sent with different contents. So that nothing is done that you did not mean, nothing was done this time. Your first submission stands: check your orders, or start again from a fresh form."}},
		{Type: problem.KeyInProgress, Shopper: stillWorking},
		{Type: problem.KeyLeaseLost, Shopper: stillWorking},
		{Type: problem.Unauthorized, Shopper: models.Words{Heading: "Please log in",
			Text: "You need to be logged in for this. Your session may have ended: log in, then send the form again."}},
		{Type: problem.TooManyRequests, Shopper: models.Words{Heading: "Too many attempts",
			Text: "There were too many attempts to sign up or log in. Wait a little, then try again."}},
		{Type: problem.CrossOrigin, Shopper: models.Words{Heading: "Refused: sent from another site",
			Text: "This form was sent from another website, so the shop refused it. Nothing was done."}},
		{Type: problem.TooLarge, Shopper: unreadable},
		{Type: problem.MalformedRequest, Shopper: unreadable},
		{Type: problem.KeyMissing, Shopper: unreadable},
		{Type: problem.KeyInvalid, Shopper: unreadable},
		{Type: problem.ServiceUnavailable, Shopper: models.Words{Heading: "The shop is busy", Retry: "Try again",
			Text: "The shop could not finish this just now. Please try again in a moment: sending the form again never does anything twice."}},
		{Type: problem.Internal, Shopper: models.Words{Heading: "Something went wrong", Retry: "Try again",
			Text: "Something went wrong on our side. Please try again: sending the form again never does anything twice."}},
	} {
		models.Declare(e)
	}
}

var (
	stillWorking = models.Words{Heading: "Still working on it", Retry: "Check again",
		Text: "Your earlier submission of this form is still being processed. Nothing was done twice. Wait a moment, then check again: you will see how it ended."}
	unreadable = models.Words{Heading: "The form could not be read",
		Text: "The form arrived damaged or incomplete, so nothing was done. Open the page again and send it again."}
)
