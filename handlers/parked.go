package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
)

// parkedLimit bounds the parked events listed: a handful is an incident,
// more is an outage the metrics tell (shop_outbox_parked).
const parkedLimit = 100

// parkedEventJSON is an event a consumer failed at every attempt.
type parkedEventJSON struct {
	Consumer  string    `json:"consumer"`
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	OrderID   string    `json:"order_id"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	ParkedAt  time.Time `json:"parked_at"`
}

type staffParkedView struct {
	layout
	Parked []outbox.Parked
	Key    string // of this page's forms, each adding its event's id
}

// listParkedEvents is the events parked most recently, each with its
// consumer and last error: GET /api/v1/staff/parked-events, and the
// console's page of them, each with a button that retries it.
func (s *Server) listParkedEvents(c *gin.Context) {
	parked, err := outbox.ParkedEvents(c.Request.Context(), s.deps.DB, parkedLimit)
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		s.renderPage(c, http.StatusOK, "staff_parked.html", staffParkedView{layout: s.layout(c), Parked: parked, Key: uuid.NewString() + "-"})
	default:
		out := make([]parkedEventJSON, 0, len(parked))
		for _, p := range parked {
			out = append(out, parkedEventJSON{p.Consumer, p.EventID, p.EventType, p.OrderID, p.Attempts, p.LastError, p.ParkedAt.UTC()})
		}
		c.JSON(http.StatusOK, gin.H{"parked_events": out})
	}
}

// retryParkedEvent has the consumer's relay hand the event again at its
// next poll: POST /api/v1/staff/parked-events/{consumer}/{event_id}/retry,
// and the console's button, which then lists what is left (an event no
// longer parked is not found only for the API).
func (s *Server) retryParkedEvent(c *gin.Context) {
	retried, err := outbox.Retry(c.Request.Context(), middleware.Tx(c), c.Param("consumer"), c.Param("event_id"))
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		c.Redirect(http.StatusSeeOther, "/staff/parked")
	case !retried:
		s.fail(c, models.ErrNotFound)
	default:
		c.JSON(http.StatusAccepted, gin.H{"consumer": c.Param("consumer"), "event_id": c.Param("event_id"), "retried": true})
	}
}

// redeliverWebhook is POST /api/v1/webhook-deliveries/{id}/redeliver: the
// sender posts the delivery again, the same webhook-id and body.
func (s *Server) redeliverWebhook(c *gin.Context) {
	d, err := notify.Redeliver(c.Request.Context(), middleware.Tx(c), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, webhookDeliveryView(d))
}
