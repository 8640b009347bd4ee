package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stripe/stripe-go/v82"

	"github.com/shop/shop/models"
)

// Stripe's answers to a refund, against Stripe's documented refund and
// error bodies (https://docs.stripe.com/api/refunds/object,
// https://docs.stripe.com/error-codes) served by an httptest server, which
// also checks the request: POST /v1/refunds with the PaymentIntent, the
// amount and the key as Idempotency-Key and in the metadata.
func TestStripeRefundErrorMapping(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		cut    bool
		want   error
		// for an answer
		state  models.State
		reason string
		id     string
	}{
		{name: "succeeded", status: 200, body: `{"id":"re_ok","object":"refund","status":"succeeded","amount":700}`, state: models.Succeeded, id: "re_ok"},
		{name: "pending", status: 200, body: `{"id":"re_p","object":"refund","status":"pending"}`, state: models.Pending, id: "re_p"},
		{name: "requires action", status: 200, body: `{"id":"re_a","object":"refund","status":"requires_action"}`, state: models.Pending, id: "re_a"},
		{name: "failed", status: 200, body: `{"id":"re_f","object":"refund","status":"failed","failure_reason":"expired_or_canceled_card"}`,
			state: models.Failed, reason: "The refund could not be sent to the card (expired or canceled card).", id: "re_f"},
		{name: "canceled", status: 200, body: `{"id":"re_c","object":"refund","status":"canceled"}`, state: models.Failed, reason: "The refund could not be sent to the card.", id: "re_c"},
		{name: "charge already refunded", status: 400, body: `{"error":{"type":"invalid_request_error","code":"charge_already_refunded","message":"Charge ch_1 has already been refunded."}}`,
			state: models.Failed, reason: "Charge ch_1 has already been refunded."},
		{name: "amount too large", status: 400, body: `{"error":{"type":"invalid_request_error","code":"amount_too_large","param":"amount","message":"Refund amount ($7.00) is greater than unrefunded amount on charge ($5.00)"}}`,
			state: models.Failed, reason: "Refund amount ($7.00) is greater than unrefunded amount on charge ($5.00)"},
		{name: "disputed", status: 400, body: `{"error":{"type":"invalid_request_error","code":"charge_disputed","message":"Charge ch_1 has been charged back; cannot issue a refund."}}`,
			state: models.Failed, reason: "Charge ch_1 has been charged back; cannot issue a refund."},
		{name: "card error", status: 402, body: `{"error":{"type":"card_error","code":"card_declined","message":"The refund was declined."}}`, state: models.Failed, reason: "The refund was declined."},
		{name: "no such payment intent", status: 404, body: `{"error":{"type":"invalid_request_error","code":"resource_missing","param":"payment_intent","message":"No such payment_intent: 'pi_x'"}}`, want: ErrRefused},
		{name: "bad parameter", status: 400, body: `{"error":{"type":"invalid_request_error","code":"parameter_invalid_integer","param":"amount","message":"Invalid integer: -1"}}`, want: ErrRefused},
		{name: "authentication", status: 401, body: `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_***"}}`, want: ErrUnavailable},
		{name: "rate limit", status: 429, body: `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Too many requests hit the API too quickly."}}`, want: ErrUnavailable},
		{name: "api error", status: 500, body: `{"error":{"type":"api_error","message":"An unknown error occurred"}}`, want: ErrInDoubt},
		{name: "same key, other parameters", status: 400, body: `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`, want: ErrInDoubt},
		{name: "same key still running", status: 409, body: `{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key."}}`, want: ErrInDoubt},
		{name: "connection cut after sending", cut: true, want: ErrInDoubt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				if r.Method != http.MethodPost || r.URL.Path != "/v1/refunds" || r.Header.Get("Idempotency-Key") != "idem_refund" ||
					r.PostForm.Encode() != (url.Values{"payment_intent": {"pi_1"}, "amount": {"700"}, "metadata[order_id]": {"o"}, "metadata[idempotency_key]": {"idem_refund"}}).Encode() {
					t.Errorf("request %s %s Idempotency-Key %q form %v", r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.PostForm)
				}
				if tc.cut {
					if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
						conn.Close()
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := NewStripe(StripeConfig{SecretKey: "sk_test_mapping", APIBase: srv.URL})
			answer, err := p.Refund(context.Background(), RefundRequest{IdempotencyKey: "idem_refund", ChargeID: "pi_1", OrderID: "o", AmountCents: 700, Currency: "USD"})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %+v, %v; want an error that is %v", answer, err, tc.want)
				}
				if (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused)) && errors.Is(err, ErrInDoubt) {
					t.Fatalf("%v is both nothing-refunded and in doubt", err)
				}
				return
			}
			if err != nil || answer.State != tc.state || answer.FailureReason != tc.reason || answer.ID != tc.id {
				t.Fatalf("got %+v, %v; want state %q, reason %q, id %q", answer, err, tc.state, tc.reason, tc.id)
			}
		})
	}
}

// A refund event is read from refund.updated, refund.failed and
// charge.refund.updated (stripe-go's event types), by the key in the
// refund's metadata; a refund without the shop's key, or another event
// type, is not one of the shop's refund events.
func TestStripeRefundEventDecoding(t *testing.T) {
	refund := `{"id":"re_1","object":"refund","status":"%s","metadata":{"idempotency_key":"idem_r"}}`
	cases := []struct {
		typ   stripe.EventType
		raw   string
		ok    bool
		state models.State
	}{
		{stripe.EventTypeRefundUpdated, fmtRefund(refund, "succeeded"), true, models.Succeeded},
		{stripe.EventTypeRefundFailed, fmtRefund(refund, "failed"), true, models.Failed},
		{stripe.EventTypeChargeRefundUpdated, fmtRefund(refund, "pending"), true, models.Pending},
		{stripe.EventTypeChargeRefunded, `{"id":"ch_1","object":"charge"}`, false, ""},
		{stripe.EventTypePaymentIntentSucceeded, fmtRefund(refund, "succeeded"), false, ""},
		{stripe.EventTypeRefundUpdated, `{"id":"re_2","object":"refund","status":"succeeded"}`, false, ""},
	}
	for _, tc := range cases {
		event := stripe.Event{ID: "evt_1", Type: tc.typ, Data: &stripe.EventData{Raw: []byte(tc.raw)}}
		got, ok := StripeEvent(event)
		ok = ok && got.Refund != nil // a refund event
		if ok != tc.ok || (ok && (got.ProviderKey != "idem_r" || got.Refund.State != tc.state || got.Refund.ID != "re_1" || got.ID != "evt_1")) {
			t.Fatalf("%s %s: got %+v, %v; want ok=%v state %q", tc.typ, tc.raw, got, ok, tc.ok, tc.state)
		}
	}
}

func fmtRefund(format, status string) string { return fmt.Sprintf(format, status) }
