package payments

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop/shop/models"
)

// Event is what a provider's event reports of one charge: the outcome of
// the request made under ProviderKey.
type Event struct {
	ID          string
	ProviderKey string
	Charge      Charge
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

// StripeChargeEvent reads the charge outcome a payment_intent event
// reports, and the key its PaymentIntent was created with; false for any
// other event, or one about a PaymentIntent the shop did not create.
func StripeChargeEvent(event stripe.Event) (Event, bool) {
	var status models.State
	switch event.Type {
	case stripe.EventTypePaymentIntentSucceeded:
		status = models.Succeeded
	case stripe.EventTypePaymentIntentPaymentFailed:
		status = models.Declined
	default:
		return Event{}, false
	}
	var intent stripe.PaymentIntent
	if event.Data == nil || json.Unmarshal(event.Data.Raw, &intent) != nil || intent.Metadata[stripeKeyMetadata] == "" {
		return Event{}, false
	}
	charge := Charge{ID: intent.ID, Status: status}
	if status == models.Declined {
		charge.DeclineReason = declineReason(&intent)
	}
	return Event{ID: event.ID, ProviderKey: intent.Metadata[stripeKeyMetadata], Charge: charge}, true
}
