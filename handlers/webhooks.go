package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// stripeScope is the idempotency scope of Stripe's webhook deliveries: the
// key is the event id, so a redelivered event is processed once.
const stripeScope = "stripe"

const stripeEventKey = "shop.stripe_event"

// verifyStripeEvent checks a webhook delivery's signature with the
// endpoint's secret, within stripe-go's tolerance, before anything else;
// a bad or missing signature gets 400 and writes nothing. It then names
// the delivery for the idempotency middleware: the event id as the key,
// and the event's id and type as the request that key names — a
// redelivery of an event may differ in delivery details, never in those.
func (s *Server) verifyStripeEvent(c *gin.Context) {
	payload, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, middleware.MaxBodyBytes))
	if err != nil {
		s.render(c, problem.WebhookSignature.With("The body could not be read: "+err.Error()))
		c.Abort()
		return
	}
	event, err := webhook.ConstructEvent(payload, c.GetHeader("Stripe-Signature"), s.deps.StripeWebhookSecret)
	if err != nil {
		s.deps.Logger.Warn("stripe webhook refused", "err", err)
		s.render(c, problem.WebhookSignature.With("The Stripe-Signature header does not verify this payload: "+err.Error()))
		c.Abort()
		return
	}
	identity, err := json.Marshal(map[string]string{"id": event.ID, "type": string(event.Type)})
	if err != nil {
		s.fail(c, err)
		c.Abort()
		return
	}
	c.Set(stripeEventKey, event)
	c.Request.Header.Set("Idempotency-Key", event.ID)
	c.Request.Header.Set("Content-Type", "application/json")
	c.Request.Body, c.Request.ContentLength = io.NopCloser(bytes.NewReader(identity)), int64(len(identity))
}

// stripeEvent applies one verified event, once: a second path to the
// truth of an attempt in doubt, beside the reconciler. An event about an
// attempt already resolved changes nothing, so a late or out-of-order
// delivery (failed after succeeded) never un-pays an order.
func (s *Server) stripeEvent(c *gin.Context) {
	event := c.MustGet(stripeEventKey).(stripe.Event)
	outcome, providerKey, ok := paymentIntentOutcome(event)
	if !ok {
		c.JSON(http.StatusOK, gin.H{"received": true, "applied": false})
		return
	}
	ctx := c.Request.Context()
	attempt, found, err := s.shop.AttemptByKey(ctx, providerKey)
	if err != nil {
		s.fail(c, err)
		return
	}
	holder := "webhook_" + event.ID
	now := s.deps.Now().UTC()
	if found && attempt.State == models.AttemptFailed && outcome.Status == models.PaymentSucceeded {
		s.recordLateCharge(c, event, attempt, outcome, holder, now)
		return
	}
	if !found || attempt.State != models.AttemptInDoubt {
		// Not one of ours, or its outcome is already recorded.
		c.JSON(http.StatusOK, gin.H{"received": true, "applied": false})
		return
	}
	attempt, held, err := s.shop.HoldForResolution(ctx, attempt.ID, holder, now, now.Add(s.deps.Lease))
	switch {
	case err != nil:
		s.fail(c, err)
		return
	case !held && attempt.State == models.AttemptInDoubt:
		// A live operation holds the order and will record the outcome;
		// if it does not, Stripe delivers the event again.
		s.fail(c, models.ErrPaymentInProgress)
		return
	case !held:
		c.JSON(http.StatusOK, gin.H{"received": true, "applied": false})
		return
	}
	payment, err := s.shop.Settle(middleware.Tx(c), attempt, outcome, holder)
	if err != nil {
		// The hold is not let go from another connection while this
		// transaction is open (on SQLite it would wait for this one's
		// write lock); it lapses after one lease.
		s.fail(c, err)
		return
	}
	s.metrics.resolutions.WithLabelValues("webhook", payment.Status).Inc()
	s.deps.Logger.Info("payment attempt in doubt resolved by a Stripe event", "attempt", attempt.ID, "order", attempt.OrderID, "event", event.ID, "outcome", payment.Status)
	c.JSON(http.StatusOK, gin.H{"received": true, "applied": true})
}

// recordLateCharge records a charge Stripe reports for an attempt the shop
// had recorded as refused. It should never happen; if it does, the charge
// is recorded all the same, and logged and counted for a person to refund
// if the order was paid twice.
func (s *Server) recordLateCharge(c *gin.Context, event stripe.Event, attempt models.PaymentAttempt, outcome models.Outcome, holder string, now time.Time) {
	if _, err := s.shop.RecordLateCharge(middleware.Tx(c), attempt, outcome, holder, now); err != nil {
		s.fail(c, err)
		return
	}
	s.metrics.resolutions.WithLabelValues("webhook", "late_charge").Inc()
	s.deps.Logger.Error("Stripe charged a payment attempt the shop had recorded as refused; recorded now — refund it if the order was paid twice",
		"attempt", attempt.ID, "order", attempt.OrderID, "event", event.ID, "charge", outcome.ChargeID)
	c.JSON(http.StatusOK, gin.H{"received": true, "applied": true})
}

// paymentIntentOutcome reads the outcome a payment_intent event reports,
// and the key the PaymentIntent was created with.
func paymentIntentOutcome(event stripe.Event) (models.Outcome, string, bool) {
	var status string
	switch event.Type {
	case stripe.EventTypePaymentIntentSucceeded:
		status = models.PaymentSucceeded
	case stripe.EventTypePaymentIntentPaymentFailed:
		status = models.PaymentDeclined
	default:
		return models.Outcome{}, "", false
	}
	var intent stripe.PaymentIntent
	if event.Data == nil || json.Unmarshal(event.Data.Raw, &intent) != nil || intent.Metadata["idempotency_key"] == "" {
		return models.Outcome{}, "", false
	}
	outcome := models.Outcome{Status: status, ChargeID: intent.ID}
	if status == models.PaymentDeclined {
		outcome.DeclineReason = "The payment was not completed."
		if intent.LastPaymentError != nil && intent.LastPaymentError.Msg != "" {
			outcome.DeclineReason = intent.LastPaymentError.Msg
		}
	}
	return outcome, intent.Metadata["idempotency_key"], true
}
