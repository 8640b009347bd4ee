package handlers

import (
	"cmp"
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
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// fail is the one way handlers report an error: problem+json for the API, a
// page for the browser, with the request's id; it ends the request's chain.
// A client that hung up gets nothing, counted as client-closed: no server fault.
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
	e.Layout = s.layout(c)
	e.Notice = views.Problem(words.Text)
	s.renderPage(c, p.Status, "error.html", e)
}

// reply answers v as JSON with status, or err as fail does.
func (s *Server) reply(c *gin.Context, err error, status int, v any) {
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(status, v)
}

// show renders page name of view with status, or err as fail does.
func (s *Server) show(c *gin.Context, err error, status int, name string, view any) {
	if err != nil {
		s.fail(c, err)
		return
	}
	s.renderPage(c, status, name, view)
}

// answerOf is the problem err answers and how a shopper is told it (in its
// named error's words, else its type's, else as internal); the one place
// that declares an answer final, stored and replayed for its key.
func (s *Server) answerOf(c *gin.Context, err error) (p *problem.Problem, words views.Words, final bool) {
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
	if e != nil {
		words = views.WordsOf(e)
	}
	final = cmp.Or(e, models.Declared(p.Type), &models.Error{}).Final
	if final {
		middleware.Final(c)
	}
	return p, cmp.Or(words, views.ShopperWords[strings.TrimPrefix(p.Type, "/problems/")], views.ShopperWords[problem.Internal.Slug]), final
}

// unreachable reports a database not reached, or lost during the request:
// the server's trouble for now, not a bug: 503, retry later.
func unreachable(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) ||
		errors.As(err, &connectErr) || pgconn.Timeout(err) ||
		errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300")
}

var codeTypes = map[models.Code]problem.Type{
	models.EINVALID:      problem.Validation,
	models.ENOTFOUND:     problem.NotFound,
	models.EUNAUTHORIZED: problem.Unauthorized,
	models.ECONFLICT:     problem.Conflict,
}

// problemOf is a domain error's problem: of its type, or its code's; else 500.
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

func (s *Server) recovered(c *gin.Context, err any) {
	s.deps.Logger.ErrorContext(c.Request.Context(), "panic", "err", err, "route", c.FullPath())
	s.fail(c, problem.Internal.With("The request could not be processed."))
}

// pageKey marks a page's request: a form in, HTML pages out, errors included.
const pageKey = "shop.page"

func isPage(c *gin.Context) bool { return c.GetBool(pageKey) }

// refuse answers the idempotency middleware's refusals as any other problem:
// each is one of the shop's types (TestEveryRefusalIsAProblemTypeOfTheShop).
func (s *Server) refuse(c *gin.Context, r middleware.Refusal) {
	if r.Cause != nil && unreachable(r.Cause) {
		s.fail(c, r.Cause) // a database out of reach: 503, told as every handler's is
		return
	}
	p := problem.Type{Slug: r.Type, Status: r.Status, Title: r.Title}.With(r.Detail)
	p.RetryAfter = r.RetryAfter
	s.fail(c, p)
}
