package handlers

import (
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
)

// A shopper asks for a refund; staff give it. Both the API and the order
// page's "Request a refund" form go through the idempotency middleware, so
// a double-click records one request.

// refundRequestJSON is one request for a refund, and how it stands.
type refundRequestJSON struct {
	ID        string              `json:"id"`
	OrderID   string              `json:"order_id"`
	State     models.RequestState `json:"state"`
	Reason    string              `json:"reason"`
	RefundID  *string             `json:"refund_id"`
	CreatedAt time.Time           `json:"created_at"`
	// DeclineReason is why staff declined the request; empty otherwise.
	DeclineReason string `json:"decline_reason,omitempty"`
}

func refundRequestView(r models.RefundRequest) refundRequestJSON {
	return refundRequestJSON{ID: r.ID, OrderID: r.OrderID, State: r.State, Reason: r.Reason, RefundID: r.RefundID, CreatedAt: r.CreatedAt.UTC(),
		DeclineReason: r.DeclineReason}
}

// reasonField is a request's optional reason, trimmed; an error when it is
// too long.
func reasonField(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if utf8.RuneCountInString(reason) > maxReason {
		return "", models.Invalid(models.FieldError{Field: "reason", Message: "must be at most 200 characters"})
	}
	return reason, nil
}

// createRefundRequest records the shopper's request for a refund
// {reason?}: from the order page's form, back to the order page, which
// shows it.
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
		c.Redirect(http.StatusSeeOther, orderPage(c.Param("id")))
	default:
		c.JSON(http.StatusCreated, refundRequestView(req))
	}
}

// withRequests adds to the order page the order's requests for a refund,
// and the form to ask for one when the order is charged and none is open.
func (s *Server) withRequests(c *gin.Context, view *orderPageView) error {
	reqs, err := s.shop.RefundRequests(c.Request.Context(), view.Order.ID)
	if err != nil {
		return err
	}
	view.Requests, view.RequestKey = reqs, uuid.NewString()
	view.CanRequest = view.Order.Charged() && view.Order.Status != models.OrderRefunded && !slices.ContainsFunc(reqs, func(r models.RefundRequest) bool { return r.State == models.RequestOpen })
	return nil
}
