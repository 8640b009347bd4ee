package handlers

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// fail is the one way handlers report an error: a domain error as its
// problem, a problem as it is, anything else logged and answered with 500;
// rendered as problem+json for the API and as a page for the browser, with
// the request's id; it ends the request's chain, so a middleware that
// fails stops the request. A request whose client hung up is answered with
// nothing, and counted and logged as the middleware's client-closed status:
// no one reads the answer, and it is no fault of the server's.
func (s *Server) fail(c *gin.Context, err error) {
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		c.AbortWithStatus(middleware.StatusClientClosed)
		return
	}
	p, words, _ := s.answerOf(c, err)
	if !isPage(c) {
		withID := *p // p may be an error's own, shared: the id is this request's
		withID.RequestID = httpkit.RequestIDOf(c.Request.Context())
		problem.Write(c, &withID)
		return
	}
	if p.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	c.Abort()
	e := explain(c, words)
	e.layout = s.layout(c)
	e.Notice = errorNotice(words.Text)
	s.renderPage(c, p.Status, "error.html", e)
}

// answerOf is the problem err answers and how a shopper is told it: the
// error's own words, or those of the error declared for its problem type.
// It is the one place that declares an answer final, stored and replayed
// for its key; a final error only comes of an operation behind the
// idempotency middleware.
func (s *Server) answerOf(c *gin.Context, err error) (p *problem.Problem, words models.Words, final bool) {
	var e *models.Error
	var throttled *accounts.ThrottledError
	switch {
	case errors.As(err, &p):
	case errors.As(err, &e):
		p = problemOf(e)
	case errors.As(err, &throttled):
		p = problem.TooManyRequests.With(throttled.Message)
		p.RetryAfter = throttled.RetryAfterSeconds()
	case models.IsUnstorableText(err):
		p = problem.MalformedRequest.With("The request contains a character that cannot be stored, such as NUL. Nothing was done.")
	case unreachable(err):
		s.deps.Logger.WarnContext(c.Request.Context(), "database unreachable", "err", err, "route", c.FullPath())
		p = problem.ServiceUnavailable.With("The database could not be reached. Retry with the same idempotency key: whatever was done already is done once.")
	default:
		s.deps.Logger.ErrorContext(c.Request.Context(), "request failed", "err", err, "route", c.FullPath())
		p = problem.Internal.With("The request could not be processed; it is safe to retry with the same idempotency key.")
	}
	if e == nil || e.Shopper.Heading == "" {
		e = declared(p.Type)
	}
	if e.Final {
		middleware.Final(c)
	}
	return p, e.Shopper, e.Final
}

// unreachable reports a database the server could not reach, or lost
// during the request: a connection refused, cut or timed out. It is the
// server's trouble for now, not a bug: 503, retry later.
func unreachable(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) ||
		errors.As(err, &connectErr) || pgconn.Timeout(err) ||
		errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300")
}

// codeTypes are the problem types of the errors known by their code alone.
var codeTypes = map[models.Code]problem.Type{
	models.EINVALID:      problem.Validation,
	models.ENOTFOUND:     problem.NotFound,
	models.EUNAUTHORIZED: problem.Unauthorized,
	models.ECONFLICT:     problem.Conflict,
}

// problemOf is the problem a domain error answers: of its own type, or of
// its code's; an error with neither is the server's fault, 500.
func problemOf(e *models.Error) *problem.Problem {
	t, ok := e.Type, e.Type.Slug != ""
	if !ok {
		t, ok = codeTypes[e.Code]
	}
	if !ok {
		return problem.Internal.With("The request could not be processed.")
	}
	p := t.With(e.Message)
	if e.Fields != nil {
		p.Errors = e.Fields
	}
	if e.Payment != nil {
		p.Payment = models.ViewPayment(*e.Payment)
	}
	if e.RetryAfter > 0 {
		p.RetryAfter = e.RetryAfter
	}
	return p
}

// declared is the error declared for a problem type (by its URI), and for
// a type without one the server's own failure, told as such.
func declared(uri string) *models.Error {
	if e := models.Declared(uri); e != nil {
		return e
	}
	return models.Declared(problem.Internal.URI())
}

func (s *Server) recovered(c *gin.Context, err any) {
	s.deps.Logger.ErrorContext(c.Request.Context(), "panic", "err", err, "route", c.FullPath())
	s.fail(c, problem.Internal.With("The request could not be processed."))
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
