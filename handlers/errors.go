package handlers

import (
	"errors"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// fail is the one way handlers report an error: a problem as it is, a domain
// error mapped to its problem, anything else logged and answered with 500;
// rendered as problem+json for the API and as a page for the browser.
func (s *Server) fail(c *gin.Context, err error) {
	var p *problem.Problem
	var e *models.Error
	var throttled *models.ThrottledError
	switch {
	case errors.As(err, &p):
	case errors.As(err, &e):
		p = problemOf(e)
	case errors.As(err, &throttled):
		p = problem.TooManyRequests.With(throttled.Message)
		p.RetryAfter = throttled.RetryAfterSeconds()
	case models.IsUnstorableText(err):
		p = problem.MalformedRequest.With("The request contains a character that cannot be stored, such as NUL. Nothing was done.")
	default:
		s.deps.Logger.Error("request failed", "err", err, "route", c.FullPath())
		p = problem.Internal.With("The request could not be processed; it is safe to retry with the same idempotency key.")
	}
	s.render(c, p)
}

// problemOf maps a domain error to its problem: the named errors to their
// own types, the rest by code; an unknown code is the server's fault, 500.
func problemOf(e *models.Error) *problem.Problem {
	switch e {
	case models.ErrOrderPaid:
		return problem.OrderPaid.With(e.Message)
	case models.ErrTokenExpired:
		return problem.TokenExpired.With(e.Message)
	case models.ErrTokenRevoked:
		return problem.TokenRevoked.With(e.Message)
	case models.ErrEmailTaken:
		return problem.EmailTaken.With(e.Message)
	case models.ErrBadCredentials:
		return problem.BadCredentials.With(e.Message)
	case billing.ErrUnconfirmed, billing.ErrEarlierUnconfirmed:
		return problem.PaymentUnconfirmed.With(e.Message)
	case billing.ErrRefundUnconfirmed, billing.ErrEarlierRefundUnconfirmed:
		return problem.RefundUnconfirmed.With(e.Message)
	case models.ErrOrderCancelled:
		return problem.OrderCancelled.With(e.Message)
	case models.ErrOrderNotPaid:
		return problem.OrderNotPaid.With(e.Message)
	case models.ErrRefundExceeds:
		return problem.RefundExceeds.With(e.Message)
	case billing.ErrProviderUnavailable, billing.ErrRefundUnavailable:
		return problem.ProviderUnavailable.With(e.Message)
	case models.ErrPaymentInProgress, models.ErrPaymentInDoubt, models.ErrRefundInDoubt:
		p := problem.PaymentInProgress.With(e.Message)
		p.RetryAfter = 1
		return p
	}
	switch e.Code {
	case models.EINVALID:
		p := problem.Validation.With(e.Message)
		p.Errors = e.Fields
		return p
	case models.ENOTFOUND:
		return problem.NotFound.With(e.Message)
	case models.EUNAUTHORIZED:
		return problem.Unauthorized.With(e.Message)
	case models.ECONFLICT:
		return problem.Conflict.With(e.Message)
	}
	return problem.Internal.With("The request could not be processed.")
}

func (s *Server) recovered(c *gin.Context, err any) {
	s.deps.Logger.Error("panic", "err", err, "route", c.FullPath())
	s.render(c, problem.Internal.With("The request could not be processed."))
}

// pageKey marks a request of the browser's pages: its errors are rendered
// as HTML pages, not problem+json.
const pageKey = "shop.page"

func isPage(c *gin.Context) bool { return c.GetBool(pageKey) }

// failAsPages makes the request's errors HTML pages: the browser's routes.
func failAsPages(c *gin.Context) { c.Set(pageKey, true) }

// failAsProblems makes the request's errors problem+json, even on a route
// of the browser's: for a client that does not ask for HTML.
func failAsProblems(c *gin.Context) { c.Set(pageKey, false) }

// render is the one way a problem reaches the client: problem+json for the
// API, an HTML page that explains it for the browser.
func (s *Server) render(c *gin.Context, p *problem.Problem) {
	if !isPage(c) {
		problem.Write(c, p)
		return
	}
	if p.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	c.Abort()
	e := explain(c, p)
	e.layout = s.layout(c)
	e.Notice = errorNotice(e.Explanation)
	s.renderPage(c, p.Status, "error.html", e)
}
