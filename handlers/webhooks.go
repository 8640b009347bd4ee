package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/stripe/stripe-go/v82"

	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
	"github.com/shop/shop/templates"
)

// stripeScope owns Stripe's deliveries' keys, each an event's id: an event is applied once.
const stripeScope = "stripe"

const stripeEventKey = "shop.stripe_event"

// verifyStripeEvent checks a delivery's signature and API version first (400
// otherwise, nothing written), then names it for the middleware: the event id as
// the key, its id and type as the request, which a redelivery never changes.
func (s *Server) verifyStripeEvent(c *gin.Context) {
	payload, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, middleware.MaxBodyBytes))
	if err != nil {
		s.fail(c, problem.WebhookSignature.With("The body could not be read: "+err.Error()))
		return
	}
	event, err := payments.VerifyStripeEvent(payload, c.GetHeader("Stripe-Signature"), s.deps.StripeWebhookSecret)
	if err != nil {
		s.deps.Logger.WarnContext(c.Request.Context(), "stripe webhook refused", "err", err)
		p := problem.WebhookSignature.With(err.Error())
		if errors.Is(err, payments.ErrEventAPIVersion) {
			p = problem.WebhookAPIVersion.With(err.Error())
		}
		s.fail(c, p)
		return
	}
	identity, _ := json.Marshal(map[string]string{"id": event.ID, "type": string(event.Type)}) // strings: never fails
	c.Set(stripeEventKey, event)
	c.Request.Header.Set("Idempotency-Key", event.ID)
	c.Request.Header.Set("Content-Type", "application/json")
	c.Request.Body, c.Request.ContentLength = io.NopCloser(bytes.NewReader(identity)), int64(len(identity))
}

// stripeEvent applies one verified event, once; one of no charge or refund is ignored.
func (s *Server) stripeEvent(c *gin.Context) {
	event := c.MustGet(stripeEventKey).(stripe.Event)
	applied, err := false, error(nil)
	if read, ok := payments.StripeEvent(event); ok {
		applied, err = s.payments.ApplyEvent(c.Request.Context(), middleware.Current(c).Tx, read)
	}
	s.reply(c, err, http.StatusOK, gin.H{"received": true, "applied": applied})
}

// webhookDeliveryJSON is one event owed to the merchant's endpoint.
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

// webhookAttemptJSON is one POST: status 0 when none came, no error when accepted.
type webhookAttemptJSON struct {
	AttemptedAt time.Time `json:"attempted_at"`
	StatusCode  int       `json:"status_code"`
	Error       string    `json:"error"`
}

func webhookDeliveryView(d models.WebhookDelivery) webhookDeliveryJSON {
	v := webhookDeliveryJSON{ID: d.ID, EventType: d.EventType, OrderID: d.OrderID, State: d.State, AttemptCount: d.Attempts,
		CreatedAt: d.CreatedAt.UTC(), Attempts: each(d.AttemptLog, func(a models.WebhookAttempt) webhookAttemptJSON {
			return webhookAttemptJSON{AttemptedAt: a.AttemptedAt.UTC(), StatusCode: a.StatusCode, Error: a.Error}
		})}
	if d.State == models.DeliveryPending {
		next := d.NextAttemptAt.UTC()
		v.NextAttemptAt = &next
	}
	if d.FinishedAt != nil {
		finished := d.FinishedAt.UTC()
		v.FinishedAt = &finished
	}
	return v
}

// isEventID: a delivery's id, an event's: "<type>:<uuid of the fact's row>".
func isEventID(id string) bool {
	typ, row, ok := outbox.SplitEventID(id)
	return ok && strings.HasPrefix(typ, "order.") && isUUID(row)
}

func (s *Server) listWebhookDeliveries(c *gin.Context) {
	deliveries, next, limit, err := readPage(c, isEventID, func(from *database.Position, limit int) ([]models.WebhookDelivery, bool, error) {
		return notify.Deliveries(c.Request.Context(), s.deps.DB, from, limit)
	}, func(d models.WebhookDelivery) cursor { return cursor{d.CreatedAt, d.ID} })
	s.reply(c, err, http.StatusOK, pageJSON(c, "webhook_deliveries", deliveries, webhookDeliveryView, next, limit))
}

func (s *Server) redeliverWebhook(c *gin.Context) {
	d, err := notify.Redeliver(c.Request.Context(), middleware.Tx(c), c.Param("id"))
	s.reply(c, err, http.StatusAccepted, webhookDeliveryView(d))
}

// deliveriesPage/{id} is the list after delivery id was sent again: a replay names it too.
const (
	deliveriesPage  = "/staff/webhooks"
	deliveriesLimit = 50
	redelivered     = "redelivered"
)

func (s *Server) staffDeliveriesPage(c *gin.Context) {
	id := c.Param("delivery_id")
	deliveries, _, err := notify.Deliveries(c.Request.Context(), s.deps.DB, nil, deliveriesLimit)
	if err != nil {
		s.fail(c, err)
		return
	}
	view := views.StaffDeliveries{Layout: s.layout(c), Deliveries: deliveries, Key: uuid.NewString() + "-"}
	if marked := s.takeRepeat(c); id != "" && (marked == redelivered || marked == redelivered+templates.Again) {
		view.Notice = views.Redelivered(deliveries, id, marked != redelivered)
	}
	s.renderPage(c, http.StatusOK, "staff_deliveries.html", view)
}

func (s *Server) staffRedeliver(c *gin.Context) {
	_, err := notify.Redeliver(c.Request.Context(), middleware.Tx(c), c.Param("delivery_id"))
	s.did(c, err, deliveriesPage+"/"+c.Param("delivery_id"), redelivered)
}

// parkedLimit bounds the parked events listed: a handful is an incident,
// more an outage the metrics tell (shop_outbox_parked).
const parkedLimit = 100

type parkedEventJSON struct {
	Consumer  string    `json:"consumer"`
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	OrderID   string    `json:"order_id"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	ParkedAt  time.Time `json:"parked_at"`
}

// listParkedEvents is the events parked most recently.
func (s *Server) listParkedEvents(c *gin.Context) {
	parked, err := outbox.ParkedEvents(c.Request.Context(), s.deps.DB, parkedLimit)
	switch {
	case err != nil:
		s.fail(c, err)
	case isPage(c):
		s.renderPage(c, http.StatusOK, "staff_parked.html", views.StaffParked{Layout: s.layout(c), Parked: parked, Key: uuid.NewString() + "-"})
	default:
		c.JSON(http.StatusOK, gin.H{"parked_events": each(parked, func(p outbox.Parked) parkedEventJSON {
			return parkedEventJSON{p.Consumer, p.EventID, p.EventType, p.OrderID, p.Attempts, p.LastError, p.ParkedAt.UTC()}
		})})
	}
}

// retryParkedEvent has the relay hand the event again at its next poll.
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
