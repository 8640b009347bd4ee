package handlers

import (
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
)

// webhookDeliveryJSON is one event owed to the merchant's endpoint, with
// every attempt made to post it.
type webhookDeliveryJSON struct {
	ID            string               `json:"id"`
	EventType     string               `json:"event_type"`
	OrderID       string               `json:"order_id"`
	State         models.DeliveryState `json:"state"`
	AttemptCount  int                  `json:"attempt_count"`
	NextAttemptAt *time.Time           `json:"next_attempt_at"`
	CreatedAt     time.Time            `json:"created_at"`
	FinishedAt    *time.Time           `json:"finished_at"`
	Attempts      []webhookAttemptJSON `json:"attempts"`
}

// webhookAttemptJSON is one POST: when, the status answered (0 when none
// came) and the error, empty when it was accepted.
type webhookAttemptJSON struct {
	AttemptedAt time.Time `json:"attempted_at"`
	StatusCode  int       `json:"status_code"`
	Error       string    `json:"error"`
}

func webhookDeliveryView(d models.WebhookDelivery) webhookDeliveryJSON {
	v := webhookDeliveryJSON{ID: d.ID, EventType: d.EventType, OrderID: d.OrderID, State: d.State, AttemptCount: d.Attempts,
		CreatedAt: d.CreatedAt.UTC(), Attempts: make([]webhookAttemptJSON, 0, len(d.AttemptLog))}
	if d.State == models.DeliveryPending {
		next := d.NextAttemptAt.UTC()
		v.NextAttemptAt = &next
	}
	if d.FinishedAt != nil {
		finished := d.FinishedAt.UTC()
		v.FinishedAt = &finished
	}
	for _, a := range d.AttemptLog {
		v.Attempts = append(v.Attempts, webhookAttemptJSON{AttemptedAt: a.AttemptedAt.UTC(), StatusCode: a.StatusCode, Error: a.Error})
	}
	return v
}

// isEventID: a delivery's id, an event's: "<type>:<uuid of the fact's row>".
func isEventID(id string) bool {
	typ, row, ok := outbox.SplitEventID(id)
	return ok && strings.HasPrefix(typ, "order.") && isUUID(row)
}

// listWebhookDeliveries is GET /api/v1/webhook-deliveries, for staff:
// the deliveries newest first, a page at a time.
func (s *Server) listWebhookDeliveries(c *gin.Context) {
	limit, after, err := pageQuery(c, isEventID)
	if err != nil {
		s.fail(c, err)
		return
	}
	var from *database.Position
	if after != nil {
		from = &database.Position{CreatedAt: after.at, ID: after.id}
	}
	deliveries, more, err := notify.Deliveries(c.Request.Context(), s.deps.DB, from, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]webhookDeliveryJSON, 0, len(deliveries))
	for _, d := range deliveries {
		out = append(out, webhookDeliveryView(d))
	}
	var next *cursor
	if more {
		last := deliveries[len(deliveries)-1]
		next = &cursor{last.CreatedAt, last.ID}
	}
	writePage(c, "webhook_deliveries", out, next, limit)
}
