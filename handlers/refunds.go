package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/models"
	"github.com/shop/shop/templates"
)

func refundLocation(r models.Refund) string { return orderLocation(r.OrderID) + "/refunds/" + r.ID }

// maxReason is the longest reason a refund takes, in characters.
const maxReason = 200

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

// createRefund gives money back on a paid order, any user's, through the
// payments service: staff only (requireStaff). The API
// takes amount_cents; the console's form an amount in the currency's
// units and a reason, which it asks for, and gets the order page again
// (422) when it cannot read them, nothing given back.
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
	var in billing.RefundInput
	var err error
	if isPage(c) {
		var wrong string
		if in, wrong = consoleRefund(body.Amount, body.Reason); wrong != "" {
			s.showStaffOrder(c, http.StatusUnprocessableEntity, errorNotice(wrong))
			return
		}
	} else {
		in, err = refundInput(body.AmountCents, body.Reason)
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
		s.markPage(c, consolePath(c.Param("id")), templates.ActRefunded)
		c.Redirect(http.StatusSeeOther, consolePath(c.Param("id")))
	default:
		c.Header("Location", refundLocation(refund))
		c.JSON(http.StatusCreated, models.ViewRefund(refund))
	}
}

// getRefund answers one refund of one of the user's orders (any user's, for
// staff).
func (s *Server) getRefund(c *gin.Context) {
	refund, err := s.ledger.OrderRefund(c.Request.Context(), currentUser(c), c.Param("id"), c.Param("refund_id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, models.ViewRefund(refund))
}
