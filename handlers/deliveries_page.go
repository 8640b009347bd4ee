package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/templates"
)

// The console's webhook deliveries: the latest, each with a button that
// sends it again (the API's redelivery, through the same middleware). The
// button leads back to the page of the delivery sent again, which names it,
// so a replayed answer names it too.

// deliveriesPage is the console's list; deliveriesPage/{id}, the same list
// after the delivery id was sent again.
const deliveriesPage = "/staff/webhooks"

// deliveriesLimit bounds the deliveries listed: the latest are the ones
// staff look for after an endpoint's outage.
const deliveriesLimit = 50

// redelivered marks, on the page a Send again leads to, that it was done.
const redelivered = "redelivered"

type staffDeliveriesView struct {
	layout
	Deliveries []models.WebhookDelivery
	Key        string // of this page's forms, each adding its delivery's id
}

// deliveryStates are a delivery's states in staff's words.
var deliveryStates = map[models.DeliveryState]string{
	models.DeliveryPending:   "waiting to be sent",
	models.DeliveryDelivered: "accepted by the endpoint",
	models.DeliveryFailed:    "refused at every attempt, given up",
}

// DeliveryState is how the delivery stands, and after how many attempts.
func (staffDeliveriesView) DeliveryState(d models.WebhookDelivery) string {
	attempts := strconv.Itoa(d.Attempts) + " attempts"
	if d.Attempts == 1 {
		attempts = "1 attempt"
	}
	return deliveryStates[d.State] + ", after " + attempts
}

// staffDeliveriesPage lists the latest deliveries; under /{id}, it opens
// saying that delivery was sent again, and whether its form was sent twice.
func (s *Server) staffDeliveriesPage(c *gin.Context) {
	id := c.Param("delivery_id")
	deliveries, _, err := notify.Deliveries(c.Request.Context(), s.deps.DB, nil, deliveriesLimit)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := staffDeliveriesView{layout: s.layout(c), Deliveries: deliveries, Key: uuid.NewString() + "-"}
	if marked := s.takeRepeat(c); id != "" && (marked == redelivered || marked == redelivered+templates.Again) {
		view.Notice = redeliveredNotice(deliveries, id, marked != redelivered)
	}
	s.renderPage(c, http.StatusOK, "staff_deliveries.html", view)
}

// redeliveredNotice says that the delivery id was sent again, naming its
// event, and, when its form was sent twice, that it was sent once.
func redeliveredNotice(deliveries []models.WebhookDelivery, id string, twice bool) *notice {
	what := "The message"
	for _, d := range deliveries {
		if d.ID == id {
			what = "The " + d.EventType + " message"
		}
	}
	n := &notice{Kind: noticeSuccess, Title: what + " is being sent again.",
		Text: "It goes to the webhook endpoint at the sender's next round, with the same webhook-id and body; reload this page to see its new attempt."}
	if twice {
		n.Also = "Sent twice, done once: the form was sent more than once; the message is sent again once."
	}
	return n
}

// staffRedeliver sends a delivery again, then shows the list opening with
// it.
func (s *Server) staffRedeliver(c *gin.Context) {
	if _, err := notify.Redeliver(c.Request.Context(), middleware.Tx(c), c.Param("delivery_id")); err != nil {
		s.fail(c, err)
		return
	}
	page := deliveriesPage + "/" + c.Param("delivery_id")
	s.markPage(c, page, redelivered)
	c.Redirect(http.StatusSeeOther, page)
}
