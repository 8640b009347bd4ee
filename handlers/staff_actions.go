package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/templates"
)

// What staff do to an order from the console: refund it (the refund
// service's, with the staff user as its scope), decline a request for a
// refund, cancel it while it is pending. Each form has its own key; a
// double-click does it once.

// consoleRefund reads the refund form: an amount in the currency's units
// ("12.50"; empty for all that is left) and a reason, which the console
// asks for. It says what is wrong, in staff's words, when the form breaks
// a rule.
func consoleRefund(amount, reason string) (billing.RefundInput, string) {
	in, err := refundInput(nil, reason)
	switch {
	case err != nil:
		return billing.RefundInput{}, "The reason is too long: at most 200 characters. Nothing was refunded."
	case in.Reason == "":
		return billing.RefundInput{}, "Say why the order is refunded. Nothing was refunded."
	}
	if amount = strings.TrimPrefix(strings.TrimSpace(amount), "$"); amount != "" {
		cents, ok := parseCents(amount)
		if !ok {
			return billing.RefundInput{}, "Enter the amount as dollars and cents, such as 12.50, or leave it empty to refund all that is left. Nothing was refunded."
		}
		in.AmountCents = &cents
	}
	return in, ""
}

// parseCents reads a positive amount with at most two decimals, "12",
// "12.5" or "12.50", in cents.
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

// staffDecline declines the order's request for a refund, for the reason
// typed, which the console asks for.
func (s *Server) staffDecline(c *gin.Context) {
	reason, err := reasonField(postForm(c).Get("reason"))
	if err != nil || reason == "" {
		s.showStaffOrder(c, http.StatusUnprocessableEntity, errorNotice("Say why the request is declined, in at most 200 characters. Nothing was changed."))
		return
	}
	_, err = s.ledger.DeclineRequest(middleware.Tx(c), currentUser(c), c.Param("id"), c.Param("request_id"), reason, s.deps.Now().UTC())
	if err != nil {
		s.fail(c, err)
		return
	}
	s.markPage(c, consolePath(c.Param("id")), templates.ActDeclined)
	c.Redirect(http.StatusSeeOther, consolePath(c.Param("id")))
}

// staffCancel cancels any user's pending order, as its shopper may.
func (s *Server) staffCancel(c *gin.Context) {
	if _, err := s.payments.CancelAny(middleware.Tx(c), currentUser(c), c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	s.markPage(c, consolePath(c.Param("id")), templates.ActCancelled)
	c.Redirect(http.StatusSeeOther, consolePath(c.Param("id")))
}
