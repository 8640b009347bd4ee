package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/stripe/stripe-go/v82"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
)

// stripeScope is the idempotency scope of Stripe's webhook deliveries: the
// key is the event id, so a redelivered event is processed once.
const stripeScope = "stripe"

const stripeEventKey = "shop.stripe_event"

// verifyStripeEvent checks a delivery's signature and API version before
// anything else (400 otherwise, nothing written), then names it for the
// middleware: the event id as the key, the event's id and type as the
// request, which a redelivery never changes (its delivery details may).
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
	identity, err := json.Marshal(map[string]string{"id": event.ID, "type": string(event.Type)})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Set(stripeEventKey, event)
	c.Request.Header.Set("Idempotency-Key", event.ID)
	c.Request.Header.Set("Content-Type", "application/json")
	c.Request.Body, c.Request.ContentLength = io.NopCloser(bytes.NewReader(identity)), int64(len(identity))
}

// stripeEvent applies one verified event, once; an event about anything
// but a charge or a refund is received and ignored.
func (s *Server) stripeEvent(c *gin.Context) {
	event := c.MustGet(stripeEventKey).(stripe.Event)
	applied, err := false, error(nil)
	if read, ok := payments.StripeEvent(event); ok {
		applied, err = s.payments.ApplyEvent(c.Request.Context(), middleware.Current(c).Tx, read)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"received": true, "applied": applied})
}
