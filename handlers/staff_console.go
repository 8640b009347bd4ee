package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/problem"
	"github.com/shop/shop/templates"
)

// The staff console at /staff: pages like the shop's, on the same session
// and cross-origin protection, every write a form with its own key through
// the same idempotency middleware. To anyone but staff it does not exist.

type staffOrdersView struct {
	layout
	Orders    []orders.OrderOfUser
	Q, Status string
	Statuses  []string // the filter's choices, besides any status
	// Older links to the next page; empty on the last.
	Older string
}

// allOrdersPage is the console's front page: every order, newest first,
// found by number or email and filtered by status. A search it cannot read
// gets the page again, saying why (400), with no orders.
func (s *Server) allOrdersPage(c *gin.Context, page []orders.OrderOfUser, next *cursor, limit int, err error) {
	view := staffOrdersView{layout: s.layout(c), Q: c.Query("q"), Status: c.Query("status"), Statuses: orders.OrderStatuses()}
	var e *models.Error
	if errors.As(err, &e) && e.Type == problem.InvalidParameter {
		view.Notice = errorNotice(e.Shopper.Text)
		s.renderPage(c, http.StatusBadRequest, "staff_orders.html", view)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	view.Orders = page
	if next != nil {
		view.Older = nextURL(c, *next, limit)
	}
	s.renderPage(c, http.StatusOK, "staff_orders.html", view)
}

type staffOrderView struct {
	layout
	orders.OrderHistory
	// Each form's own key: refund, cancel, and decline (one per request).
	RefundKey, CancelKey string
	DeclineKeys          map[string]string
	Refundable           int64
}

// showStaffOrder renders the console's order page with status, opening
// with the notice.
func (s *Server) showStaffOrder(c *gin.Context, status int, n *notice) {
	h, err := s.shop.OrderHistory(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	refundable, err := s.ledger.Refundable(c.Request.Context(), h.Order.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := staffOrderView{layout: s.layout(c), OrderHistory: h, RefundKey: uuid.NewString(), CancelKey: uuid.NewString(),
		DeclineKeys: map[string]string{}, Refundable: refundable}
	for _, r := range h.Requests {
		view.DeclineKeys[r.ID] = uuid.NewString()
	}
	// A form refused before it ran comes back with its key: nothing was
	// stored under it, so the corrected form runs with it.
	if sent := postForm(c).Get(middleware.FormKeyField); c.Request.Method == http.MethodPost && sent != "" {
		if id := c.Param("request_id"); id != "" {
			view.DeclineKeys[id] = sent
		} else {
			view.RefundKey = sent
		}
	}
	view.Notice = n
	if n == nil {
		if title, also := templates.StaffDid(s.takeRepeat(c), h.Order, lastRefund(h.Order)); title != "" {
			view.Notice = &notice{Kind: noticeSuccess, Title: title, Also: also}
		}
	}
	s.renderPage(c, status, "staff_order.html", view)
}

// nameOf is the email of the user id the order's history names.
func (v staffOrderView) nameOf(id *string) string {
	if id == nil {
		return "a staff member (not recorded)"
	}
	if email, ok := v.Names[*id]; ok {
		return email
	}
	return "a former user"
}

// RefundLine is one refund of the order, whatever its state: how much,
// how it stands, who gave it and why.
func (v staffOrderView) RefundLine(r models.Refund) string {
	text := models.Money(r.AmountCents, r.Currency) + " by " + v.nameOf(r.CreatedBy) + ": " + templates.StateName(r.State) + "."
	if r.Reason != "" {
		text += " Reason: " + r.Reason
	}
	if r.FailureReason != "" {
		text += " The provider said: " + r.FailureReason
	}
	return text
}

// RequestLine is one of the shopper's requests for a refund and its answer.
func (v staffOrderView) RequestLine(r models.RefundRequest) string {
	text := templates.AskedForRefund("The shopper", r)
	switch r.State {
	case models.RequestFulfilled:
		return text + ": refunded."
	case models.RequestDeclined:
		return text + ": declined by " + v.nameOf(r.DecidedBy) + ". Reason: " + r.DeclineReason
	}
	return text + ": open."
}

// Cancellation says who cancelled the order, "" when it is not cancelled.
func (v staffOrderView) Cancellation() string {
	if v.Order.Status != models.OrderCancelled {
		return ""
	}
	switch v.Order.CancelReason {
	case models.CancelledExpired:
		return "Cancelled by the expiry sweep: nobody paid it in time."
	case models.CancelledByStaff:
		return "Cancelled by the shop's staff."
	}
	return "Cancelled by its shopper."
}

// Routes lists the server's routes, for the tests that go through every
// one of them (the console's refusals).
func (s *Server) Routes() gin.RoutesInfo { return s.router.Routes() }

// actionWords are the audit trail's actions in staff's words.
var actionWords = map[audit.Action]string{
	audit.ActionOrderPlaced: "Placed the order", audit.ActionOrderCancelled: "Cancelled the order",
	audit.ActionRefundRequested: "Asked for a refund", audit.ActionRequestDeclined: "Declined the request for a refund",
	audit.ActionRefundGiven: "Gave a refund", audit.ActionRestocked: "Restocked",
	audit.ActionChargeSucceeded: "Charge succeeded", audit.ActionChargeDeclined: "Card declined",
	audit.ActionLateCharge: "A late charge landed", audit.ActionRefundSucceeded: "Refund succeeded",
	audit.ActionRefundPending: "Refund on its way", audit.ActionRefundFailed: "Refund failed",
	audit.ActionLateRefund: "A late refund landed", audit.ActionRefundExcess: "Refunded twice (recover it)",
}

// actorWords are the shop's own actors, who are no user, in staff's words.
var actorWords = map[audit.ActorKind]string{
	audit.ActorReconciler: "the reconciler", audit.ActorWebhook: "a webhook of the provider",
	audit.ActorExpiry: "the expiry sweep", audit.ActorProviderReturn: "the shopper's return from the card provider",
}

// TrailLine is one entry of the order's audit trail: what was done, by
// whom, for how much and why.
func (v staffOrderView) TrailLine(e audit.Entry) string {
	what, ok := actionWords[e.Action]
	if !ok {
		what = string(e.Action)
	}
	who := actorWords[e.Actor.Kind]
	if e.Actor.UserID != nil {
		who = v.nameOf(e.Actor.UserID)
		if e.Actor.Kind == audit.ActorStaff {
			who += " (staff)"
		}
	}
	text := what + ", by " + who
	if e.AmountCents != nil {
		text += ": " + models.Money(*e.AmountCents, v.Order.Currency)
	}
	if e.Reason != "" {
		text += ". Reason: " + e.Reason
	}
	return text + "."
}
