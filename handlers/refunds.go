package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/templates"
)

// Refunds: staff give them (API, console's form); a shopper asks for one (API, order page).

const maxReason = 200 // characters

// reasonField is a reason, trimmed; an error when it is too long.
func reasonField(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if utf8.RuneCountInString(reason) > maxReason {
		return "", models.Invalid(models.FieldError{Field: "reason", Message: "must be at most 200 characters"})
	}
	return reason, nil
}

// refundInput is a refund's one validation, for the API and the console:
// an optional positive amount and an optional reason, trimmed.
func refundInput(amountCents *int64, reason string) (billing.RefundInput, error) {
	var fields []models.FieldError
	if amountCents != nil && *amountCents <= 0 {
		fields = append(fields, models.FieldError{Field: "amount_cents", Message: "must be a positive number of cents"})
	}
	reason, err := reasonField(reason)
	var invalid *models.Error
	if errors.As(err, &invalid) {
		fields = append(fields, invalid.Fields...)
	}
	if fields != nil {
		return billing.RefundInput{}, models.Invalid(fields...)
	}
	return billing.RefundInput{AmountCents: amountCents, Reason: reason}, nil
}

// consoleRefund reads the console's form: an amount ("12.50"; empty for all
// that is left) and a reason, required; or what is wrong, in staff's words.
func consoleRefund(amount, reason string) (billing.RefundInput, string) {
	in, err := refundInput(nil, reason)
	switch {
	case err != nil:
		return in, "The reason is too long: at most 200 characters. Nothing was refunded."
	case in.Reason == "":
		return in, "Say why the order is refunded. Nothing was refunded."
	}
	if amount = strings.TrimPrefix(strings.TrimSpace(amount), "$"); amount != "" {
		cents, ok := parseCents(amount)
		if !ok {
			return in, "Enter the amount as dollars and cents, such as 12.50, or leave it empty to refund all that is left. Nothing was refunded."
		}
		in.AmountCents = &cents
	}
	return in, ""
}

// parseCents reads a positive "12", "12.5" or "12.50" in cents.
func parseCents(s string) (int64, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 || whole == "" || len(whole) > 9 || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, false
	}
	units, _ := strconv.ParseInt(whole, 10, 64)
	cents, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	total := units*100 + cents
	return total, total > 0
}

// createRefund gives money back on any user's paid order: staff only. A
// console form it cannot read gets the order's page again (422).
func (s *Server) createRefund(c *gin.Context) {
	var body struct {
		AmountCents *int64 `json:"amount_cents"`
		Amount      string `json:"-" form:"amount"`
		Reason      string `json:"reason" form:"reason"`
	}
	if err := decode(c, &body); err != nil {
		s.fail(c, err)
		return
	}
	in, err := refundInput(body.AmountCents, body.Reason)
	if isPage(c) {
		var wrong string
		if in, wrong = consoleRefund(body.Amount, body.Reason); wrong != "" {
			s.showStaffOrder(c, http.StatusUnprocessableEntity, views.Problem(wrong))
			return
		}
	}
	var refund models.Refund
	if err == nil {
		refund, err = s.payments.Refund(c.Request.Context(), operationOf(c), currentUser(c), c.Param("id"), in)
	}
	if err == nil && refund.State == models.Failed { // the provider refused it: an error, for the API and the console alike
		err = models.ErrRefundFailed.With(refund.FailureReason)
	}
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		s.did(c, nil, views.ConsolePath(c.Param("id")), templates.ActRefunded)
	default:
		c.Header("Location", orderLocation(refund.OrderID)+"/refunds/"+refund.ID)
		c.JSON(http.StatusCreated, models.ViewRefund(refund))
	}
}

func (s *Server) getRefund(c *gin.Context) {
	refund, err := s.ledger.OrderRefund(c.Request.Context(), currentUser(c), c.Param("id"), c.Param("refund_id"))
	s.reply(c, err, http.StatusOK, models.ViewRefund(refund))
}

type refundRequestJSON struct {
	ID            string              `json:"id"`
	OrderID       string              `json:"order_id"`
	State         models.RequestState `json:"state"`
	Reason        string              `json:"reason"`
	RefundID      *string             `json:"refund_id"`
	CreatedAt     time.Time           `json:"created_at"`
	DeclineReason string              `json:"decline_reason,omitempty"`
}

func refundRequestView(r models.RefundRequest) refundRequestJSON {
	return refundRequestJSON{ID: r.ID, OrderID: r.OrderID, State: r.State, Reason: r.Reason, RefundID: r.RefundID, CreatedAt: r.CreatedAt.UTC(),
		DeclineReason: r.DeclineReason}
}

// createRefundRequest records the shopper's request for a refund {reason?}.
func (s *Server) createRefundRequest(c *gin.Context) {
	var in struct {
		Reason string `json:"reason" form:"reason"`
	}
	err := decode(c, &in)
	if err == nil {
		in.Reason, err = reasonField(in.Reason)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	req, err := s.ledger.RequestRefund(middleware.Tx(c), currentUser(c).ID, c.Param("id"), in.Reason, s.deps.Now().UTC())
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		c.Redirect(http.StatusSeeOther, views.OrderPath(c.Param("id")))
	default:
		c.JSON(http.StatusCreated, refundRequestView(req))
	}
}
