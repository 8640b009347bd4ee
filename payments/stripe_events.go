package payments

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop/shop/models"
)

// Event is what a provider's event reports of one request: the outcome of
// the charge, or with Refund the refund, made under ProviderKey.
type Event struct {
	ID          string
	ProviderKey string
	Charge      Charge
	Refund      *RefundAnswer
}

// ErrEventSignature: a webhook delivery whose signature does not verify
// its payload with the endpoint's secret, within stripe-go's tolerance.
var ErrEventSignature = errors.New("the Stripe-Signature header does not verify this payload")

// ErrEventAPIVersion: a correctly signed delivery of an event rendered in
// an API version that stripe-go does not read; its objects may decode
// wrong, so it is refused rather than applied.
var ErrEventAPIVersion = errors.New("the event's Stripe API version is not the one this shop reads")

// VerifyStripeEvent checks a webhook delivery's signature, then its API
// version, and decodes the event.
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

// StripeEvent reads the outcome a payment_intent event reports of a
// charge, or a refund.updated, refund.failed or charge.refund.updated event
// of a refund, and the key it was made under (in its metadata). Any other
// event, or one about an object the shop did not make, is not read (false):
// charge.refunded carries the charge, not a refund the shop can match.
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
