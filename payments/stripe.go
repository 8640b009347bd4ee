package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop/shop/internal/tracing"
	"github.com/shop/shop/models"
)

// ErrInDoubt wraps a provider answer that does not say whether money was
// taken: the request may have been processed. It is not ErrUnavailable,
// so the attempt stays in doubt and is resolved by sending the same
// request again under the same key — never by charging under another.
var ErrInDoubt = errors.New("the payment provider did not say whether it charged")

// Stripe charges through Stripe's PaymentIntents API: one PaymentIntent per
// charge, created and confirmed in one call, with the derived key as
// Stripe's Idempotency-Key, so that Stripe answers a repeat with the first
// outcome.
type Stripe struct {
	client *stripe.Client
}

// StripeConfig configures the Stripe provider.
type StripeConfig struct {
	SecretKey string
	// APIBase replaces https://api.stripe.com, for stripe-mock; optional.
	APIBase string
	// HTTPClient is the client requests go through; optional.
	HTTPClient *http.Client
	// Tracer traces each request to Stripe in a client span; optional.
	Tracer trace.TracerProvider
}

// NewStripe builds the Stripe provider. stripe-go does not retry on its own
// here: a request without an answer leaves the attempt in doubt, and the
// shop's resolution sends it again under the same key.
func NewStripe(cfg StripeConfig) *Stripe {
	backend := &stripe.BackendConfig{
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIBase != "" {
		backend.URL = stripe.String(strings.TrimRight(cfg.APIBase, "/"))
	}
	client := cfg.HTTPClient
	if tracing.On(cfg.Tracer) {
		// stripe-go's own client, when none is given: an 80-second timeout.
		traced := http.Client{Timeout: 80 * time.Second}
		if client != nil {
			traced = *client
		}
		traced.Transport = tracing.Transport(traced.Transport, cfg.Tracer)
		client = &traced
	}
	if client != nil {
		backend.HTTPClient = client
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
	if req.ReturnURL != "" {
		// Where Stripe sends the shopper back after 3-D Secure.
		params.ReturnURL = stripe.String(req.ReturnURL)
	}
	keyed(params, req.IdempotencyKey, req.OrderID)
	intent, err := s.client.V1PaymentIntents.Create(ctx, params)
	return answered(intent, err, chargeOfIntent, chargeOfError)
}

// answered reads what Stripe answered a request that makes a charge or a
// refund: the object made, through of; Stripe's error, through ofError; or
// no answer at all (a timeout, a connection cut after the request was sent),
// which leaves the request in doubt: Stripe may have done it.
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

// keyed sends a request to Stripe under the key, as its Idempotency-Key and
// in its metadata (with the order's id): charges and refunds alike.
func keyed(params interface {
	SetIdempotencyKey(string)
	AddMetadata(string, string)
}, key, orderID string) {
	params.SetIdempotencyKey(key)
	params.AddMetadata("order_id", orderID)
	params.AddMetadata(stripeKeyMetadata, key)
}

// stripeKeyMetadata is the metadata entry every PaymentIntent carries its
// idempotency key in: what Find searches, and what an event is matched by.
const stripeKeyMetadata = "idempotency_key"

// stripeDeclined is the reason of a decline Stripe gives no message for.
const stripeDeclined = "The payment was not completed."

// KeyLifetime implements Provider: Stripe may prune an idempotency key once
// it is 24 hours old, and then takes a request with it as new. An hour of
// margin.
func (s *Stripe) KeyLifetime() time.Duration { return 23 * time.Hour }

// Find implements Provider: the PaymentIntent created under the key — read
// by its id once known (a 3-D Secure return must see it at once), else
// searched by the metadata every charge carries.
func (s *Stripe) Find(ctx context.Context, req ChargeRequest) (Charge, bool, error) {
	if req.ChargeID != "" {
		intent, err := s.client.V1PaymentIntents.Retrieve(ctx, req.ChargeID, nil)
		if err != nil {
			return Charge{}, false, fmt.Errorf("%w: retrieve: %w", ErrInDoubt, err)
		}
		charge, err := chargeOfIntent(intent)
		return charge, err == nil, err
	}
	params := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{
		Query: fmt.Sprintf("metadata['%s']:'%s'", stripeKeyMetadata, req.IdempotencyKey),
	}}
	for intent, err := range s.client.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return Charge{}, false, fmt.Errorf("%w: search: %w", ErrInDoubt, err)
		}
		charge, err := chargeOfIntent(intent)
		return charge, err == nil, err
	}
	return Charge{}, false, nil
}

// Expire implements Expirer: Stripe keeps a PaymentIntent that requires
// action for as long as the customer may come back, so the shop cancels it
// once its authentication has expired; one that succeeded meanwhile cannot
// be, and is answered as it is.
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
	case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusCanceled:
		// Confirmation failed: the payment method was refused.
		return Charge{ID: intent.ID, Status: models.Declined, DeclineReason: declineReason(intent)}, nil
	case stripe.PaymentIntentStatusRequiresAction:
		if next := intent.NextAction; next != nil && next.RedirectToURL != nil && next.RedirectToURL.URL != "" {
			// 3-D Secure: the shopper authenticates on Stripe's page.
			return Charge{ID: intent.ID, Status: models.RequiresAction, NextActionURL: next.RedirectToURL.URL}, nil
		}
	}
	// processing, requires_capture, an action without a page to send the
	// shopper to…: not final yet; the webhook or a later resolution learns
	// the outcome.
	return Charge{}, fmt.Errorf("%w: PaymentIntent %s is %s", ErrInDoubt, intent.ID, intent.Status)
}

// chargeOfError maps Stripe's errors (https://docs.stripe.com/error-handling):
//   - a card error is a decline: final, stored as 402;
//   - an invalid request (400, 404) failed Stripe's validation, so Stripe
//     saved nothing under the key ("results are only saved if an API
//     endpoint started executing"), and the same request fails the same
//     way every time: a definitive refusal, ErrRefused;
//   - failed authentication or a rate limit (401, 403, 429) refused this
//     request before anything was charged: ErrUnavailable. Stripe checks
//     these before its idempotency layer, so for a repeat of an earlier
//     request they say nothing about that request;
//   - an idempotency error (this key with other parameters, or a request
//     with this key still running: 409) and any 5xx ("treat the result of
//     a 500 request as indeterminate") leave the attempt in doubt: never a
//     reason to charge under another key.
func chargeOfError(e *stripe.Error) (Charge, error) {
	switch {
	case e.Type == stripe.ErrorTypeCard:
		c := Charge{Status: models.Declined, DeclineReason: e.Msg}
		if e.PaymentIntent != nil {
			c.ID = e.PaymentIntent.ID
		}
		if c.DeclineReason == "" {
			c.DeclineReason = "Your card was declined."
		}
		return c, nil
	case e.Type == stripe.ErrorTypeIdempotency, e.HTTPStatusCode == http.StatusConflict, e.HTTPStatusCode >= 500:
		return Charge{}, fmt.Errorf("%w: stripe %d %s: %s", ErrInDoubt, e.HTTPStatusCode, e.Type, e.Msg)
	case e.Type == stripe.ErrorTypeInvalidRequest && (e.HTTPStatusCode == http.StatusBadRequest || e.HTTPStatusCode == http.StatusNotFound):
		return Charge{}, fmt.Errorf("%w: stripe %d %s: %s", ErrRefused, e.HTTPStatusCode, e.Type, e.Msg)
	case e.HTTPStatusCode >= 400:
		return Charge{}, fmt.Errorf("%w: stripe %d %s: %s", ErrUnavailable, e.HTTPStatusCode, e.Type, e.Msg)
	}
	return Charge{}, fmt.Errorf("%w: stripe %d %s: %s", ErrInDoubt, e.HTTPStatusCode, e.Type, e.Msg)
}

// declineReason is what a refused PaymentIntent says of its refusal.
func declineReason(intent *stripe.PaymentIntent) string {
	if intent.LastPaymentError != nil && intent.LastPaymentError.Msg != "" {
		return intent.LastPaymentError.Msg
	}
	return stripeDeclined
}
