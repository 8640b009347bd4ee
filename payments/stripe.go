package payments

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop/shop/internal/tracing"
	"github.com/shop/shop/models"
)

// ErrInDoubt wraps an answer that does not say whether the request was
// carried out: it is sent again under the same key, never under another.
var ErrInDoubt = errors.New("the payment provider did not say whether it charged")

// Stripe charges through PaymentIntents (one per charge, created and confirmed
// at once) and refunds through Refunds, under the request's Idempotency-Key.
type Stripe struct{ client *stripe.Client }

// StripeConfig configures the Stripe provider; APIBase (for stripe-mock),
// HTTPClient and Tracer are optional.
type StripeConfig struct {
	SecretKey  string
	APIBase    string
	HTTPClient *http.Client
	Tracer     trace.TracerProvider
}

// NewStripe builds the Stripe provider. stripe-go does not retry here: a
// request without an answer stays in doubt, for the shop to resolve.
func NewStripe(cfg StripeConfig) *Stripe {
	backend := &stripe.BackendConfig{
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIBase != "" {
		backend.URL = stripe.String(strings.TrimRight(cfg.APIBase, "/"))
	}
	if cfg.HTTPClient != nil || tracing.On(cfg.Tracer) {
		client := http.Client{Timeout: 80 * time.Second} // stripe-go's own, when none is given
		if cfg.HTTPClient != nil {
			client = *cfg.HTTPClient
		}
		client.Transport = tracing.Transport(client.Transport, cfg.Tracer)
		backend.HTTPClient = &client
	}
	api := stripe.GetBackendWithConfig(stripe.APIBackend, backend)
	return &Stripe{client: stripe.NewClient(cfg.SecretKey, stripe.WithBackends(&stripe.Backends{API: api, Connect: api, Uploads: api, MeterEvents: api}))}
}

// Charge implements Provider.
func (s *Stripe) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	params := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(req.AmountCents),
		Currency:           stripe.String(strings.ToLower(req.Currency)),
		PaymentMethod:      stripe.String(req.PaymentMethod),
		PaymentMethodTypes: []*string{stripe.String("card")},
		Confirm:            stripe.Bool(true),
	}
	if req.ReturnURL != "" { // where Stripe sends the shopper back after 3-D Secure
		params.ReturnURL = stripe.String(req.ReturnURL)
	}
	keyed(params, req.IdempotencyKey, req.OrderID)
	intent, err := s.client.V1PaymentIntents.Create(ctx, params)
	return answered(intent, err, chargeOfIntent, chargeOfError)
}

// answered reads the object made (of), Stripe's error (ofError), or no
// answer at all (a timeout, a cut connection), which leaves it in doubt.
func answered[T, A any](made T, err error, of func(T) (A, error), ofError func(*stripe.Error) (A, error)) (A, error) {
	var stripeErr *stripe.Error
	switch {
	case errors.As(err, &stripeErr):
		return ofError(stripeErr)
	case err != nil:
		return *new(A), fmt.Errorf("%w: %w", ErrInDoubt, err)
	}
	return of(made)
}

// keyed sends a request under the key, also in its metadata.
func keyed(params interface {
	SetIdempotencyKey(string)
	AddMetadata(string, string)
}, key, orderID string) {
	params.SetIdempotencyKey(key)
	params.AddMetadata("order_id", orderID)
	params.AddMetadata(stripeKeyMetadata, key)
}

// stripeKeyMetadata carries the key: what Find searches, events match.
const stripeKeyMetadata = "idempotency_key"

// The reasons of a decline or a failed refund Stripe gives no message for.
const (
	stripeDeclined     = "The payment was not completed."
	stripeRefundFailed = "The refund could not be sent to the card."
)

// KeyLifetime implements Provider: Stripe may prune a key once it is 24
// hours old, and then takes a request with it as new; an hour of margin.
func (s *Stripe) KeyLifetime() time.Duration { return 23 * time.Hour }

// Find implements Provider: the PaymentIntent read by its id once known (a
// 3-D Secure return must see it at once), else searched by its metadata.
func (s *Stripe) Find(ctx context.Context, req ChargeRequest) (Charge, bool, error) {
	var intent *stripe.PaymentIntent
	var err error
	if req.ChargeID != "" {
		intent, err = s.client.V1PaymentIntents.Retrieve(ctx, req.ChargeID, nil)
	} else {
		query := stripe.SearchParams{Query: fmt.Sprintf("metadata['%s']:'%s'", stripeKeyMetadata, req.IdempotencyKey)}
		for intent, err = range s.client.V1PaymentIntents.Search(ctx, &stripe.PaymentIntentSearchParams{SearchParams: query}) {
			break // the first is the one
		}
	}
	if err != nil {
		return Charge{}, false, fmt.Errorf("%w: find: %w", ErrInDoubt, err)
	}
	if intent == nil {
		return Charge{}, false, nil
	}
	charge, err := chargeOfIntent(intent)
	return charge, err == nil, err
}

// Expire implements Expirer: the shop cancels the PaymentIntent; one that
// succeeded meanwhile cannot be, and is answered as it is.
func (s *Stripe) Expire(ctx context.Context, req ChargeRequest) (Charge, error) {
	intent, err := s.client.V1PaymentIntents.Cancel(ctx, req.ChargeID, nil)
	var stripeErr *stripe.Error
	if errors.As(err, &stripeErr) && stripeErr.HTTPStatusCode == http.StatusBadRequest {
		charge, _, err := s.Find(ctx, req)
		return charge, err
	}
	if err != nil {
		return Charge{}, fmt.Errorf("%w: cancel: %w", ErrInDoubt, err)
	}
	return chargeOfIntent(intent)
}

// chargeOfIntent reads the outcome of a confirmed PaymentIntent.
func chargeOfIntent(intent *stripe.PaymentIntent) (Charge, error) {
	switch intent.Status {
	case stripe.PaymentIntentStatusSucceeded:
		return Charge{ID: intent.ID, Status: models.Succeeded}, nil
	case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusCanceled: // the method was refused
		return Charge{ID: intent.ID, Status: models.Declined, DeclineReason: declineReason(intent)}, nil
	case stripe.PaymentIntentStatusRequiresAction:
		if next := intent.NextAction; next != nil && next.RedirectToURL != nil && next.RedirectToURL.URL != "" { // 3-D Secure
			return Charge{ID: intent.ID, Status: models.RequiresAction, NextActionURL: next.RedirectToURL.URL}, nil
		}
	}
	// processing, requires_capture, an action without a page…: a webhook or a later resolution learns the outcome.
	return Charge{}, fmt.Errorf("%w: PaymentIntent %s is %s", ErrInDoubt, intent.ID, intent.Status)
}

// chargeOfError maps Stripe's errors (https://docs.stripe.com/error-handling):
//   - a card error is a decline: final;
//   - an invalid request (400, 404) failed validation, so Stripe saved
//     nothing under the key ("results are only saved if an API endpoint
//     started executing") and fails it alike every time: ErrRefused;
//   - 401, 403, 429 refused this request before anything was done:
//     ErrUnavailable (checked before Stripe's idempotency layer, so they
//     say nothing about an earlier request under the key);
//   - an idempotency error (409: other parameters, or a request under the
//     key still running) and any 5xx ("indeterminate") leave it in doubt.
func chargeOfError(e *stripe.Error) (Charge, error) {
	if e.Type == stripe.ErrorTypeCard {
		c := Charge{Status: models.Declined, DeclineReason: cmp.Or(e.Msg, "Your card was declined.")}
		if e.PaymentIntent != nil {
			c.ID = e.PaymentIntent.ID
		}
		return c, nil
	}
	answer := ErrInDoubt
	switch {
	case e.Type == stripe.ErrorTypeIdempotency, e.HTTPStatusCode == http.StatusConflict, e.HTTPStatusCode >= 500:
	case e.Type == stripe.ErrorTypeInvalidRequest && (e.HTTPStatusCode == http.StatusBadRequest || e.HTTPStatusCode == http.StatusNotFound):
		answer = ErrRefused
	case e.HTTPStatusCode >= 400:
		answer = ErrUnavailable
	}
	return Charge{}, fmt.Errorf("%w: stripe %d %s: %s", answer, e.HTTPStatusCode, e.Type, e.Msg)
}

// declineReason is what a refused PaymentIntent says of its refusal.
func declineReason(intent *stripe.PaymentIntent) string {
	if intent.LastPaymentError != nil {
		return cmp.Or(intent.LastPaymentError.Msg, stripeDeclined)
	}
	return stripeDeclined
}

// Refund implements Provider: a refund of the charge's PaymentIntent.
func (s *Stripe) Refund(ctx context.Context, req RefundRequest) (RefundAnswer, error) {
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(req.ChargeID), Amount: stripe.Int64(req.AmountCents)}
	keyed(params, req.IdempotencyKey, req.OrderID)
	refund, err := s.client.V1Refunds.Create(ctx, params)
	return answered(refund, err, func(r *stripe.Refund) (RefundAnswer, error) { return refundAnswerOf(r), nil }, refundOfError)
}

// refundOfError maps Stripe's errors as chargeOfError does, but a card error
// or Stripe's refusal of the refund itself (already refunded, too much,
// disputed) is a final failed refund: Stripe answers alike under the key.
func refundOfError(e *stripe.Error) (RefundAnswer, error) {
	refusals := []stripe.ErrorCode{stripe.ErrorCodeChargeAlreadyRefunded, stripe.ErrorCodeAmountTooLarge,
		stripe.ErrorCodeChargeDisputed, stripe.ErrorCodeRefundDisputedPayment}
	refused := e.Type == stripe.ErrorTypeInvalidRequest && e.HTTPStatusCode == http.StatusBadRequest && slices.Contains(refusals, e.Code)
	if _, err := chargeOfError(e); err != nil && !refused {
		return RefundAnswer{}, err
	}
	return RefundAnswer{State: models.Failed, FailureReason: cmp.Or(e.Msg, stripeRefundFailed)}, nil
}

// FindRefund implements Provider: Stripe has no search for refunds, so the
// PaymentIntent's are listed and matched by the key in their metadata.
func (s *Stripe) FindRefund(ctx context.Context, req RefundRequest) (RefundAnswer, bool, error) {
	params := &stripe.RefundListParams{PaymentIntent: stripe.String(req.ChargeID)}
	for refund, err := range s.client.V1Refunds.List(ctx, params) {
		if err != nil {
			return RefundAnswer{}, false, fmt.Errorf("%w: list refunds: %w", ErrInDoubt, err)
		}
		if refund.Metadata[stripeKeyMetadata] == req.IdempotencyKey {
			return refundAnswerOf(refund), true, nil
		}
	}
	return RefundAnswer{}, false, nil
}

// refundAnswerOf reads a Stripe refund: succeeded, failed (or canceled),
// else pending.
func refundAnswerOf(r *stripe.Refund) RefundAnswer {
	answer := RefundAnswer{ID: r.ID, State: models.Pending}
	switch r.Status {
	case stripe.RefundStatusSucceeded:
		answer.State = models.Succeeded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		answer.State, answer.FailureReason = models.Failed, stripeRefundFailed
		if r.FailureReason != "" {
			answer.FailureReason = "The refund could not be sent to the card (" + strings.ReplaceAll(string(r.FailureReason), "_", " ") + ")."
		}
	}
	return answer
}

// Event is what a provider's event reports of the charge, or refund, made
// under ProviderKey.
type Event struct {
	ID, ProviderKey string
	Charge          Charge
	Refund          *RefundAnswer
}

// A delivery whose signature does not verify, or a signed event of an API
// version stripe-go does not read (its objects may decode wrong), is refused.
var (
	ErrEventSignature  = errors.New("the Stripe-Signature header does not verify this payload")
	ErrEventAPIVersion = errors.New("the event's Stripe API version is not the one this shop reads")
)

// VerifyStripeEvent checks a delivery's signature, then its API version.
func VerifyStripeEvent(payload []byte, signature, secret string) (stripe.Event, error) {
	if err := webhook.ValidatePayload(payload, signature, secret); err != nil {
		return stripe.Event{}, fmt.Errorf("%w: %w", ErrEventSignature, err)
	}
	event, err := webhook.ConstructEventWithOptions(payload, signature, secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		return stripe.Event{}, fmt.Errorf("%w: %w", ErrEventSignature, err)
	}
	if _, err := webhook.ConstructEvent(payload, signature, secret); err != nil {
		return stripe.Event{}, fmt.Errorf("%w: the event is of %s, this shop reads %s", ErrEventAPIVersion, event.APIVersion, stripe.APIVersion)
	}
	return event, nil
}

// StripeEvent reads a payment_intent event of a charge, or a refund.updated,
// refund.failed or charge.refund.updated event of a refund, made under a
// key of the shop's; no other (charge.refunded carries no refund to match).
func StripeEvent(event stripe.Event) (Event, bool) {
	var intent stripe.PaymentIntent
	var refund stripe.Refund
	object, metadata, isRefund := any(&intent), &intent.Metadata, false
	switch event.Type {
	case stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentPaymentFailed:
	case stripe.EventTypeRefundUpdated, stripe.EventTypeRefundFailed, stripe.EventTypeChargeRefundUpdated:
		object, metadata, isRefund = &refund, &refund.Metadata, true
	default:
		return Event{}, false
	}
	if event.Data == nil || json.Unmarshal(event.Data.Raw, object) != nil || (*metadata)[stripeKeyMetadata] == "" {
		return Event{}, false
	}
	read := Event{ID: event.ID, ProviderKey: (*metadata)[stripeKeyMetadata]}
	switch {
	case isRefund:
		answer := refundAnswerOf(&refund)
		read.Refund = &answer
	case event.Type == stripe.EventTypePaymentIntentSucceeded:
		read.Charge = Charge{ID: intent.ID, Status: models.Succeeded}
	default:
		read.Charge = Charge{ID: intent.ID, Status: models.Declined, DeclineReason: declineReason(&intent)}
	}
	return read, true
}
