package payments

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shop/shop/models"
)

// Stripe's error mapping, against Stripe's documented error bodies
// (https://docs.stripe.com/api/errors, https://docs.stripe.com/error-handling)
// served by an httptest server: stripe-mock validates requests but never
// declines or fails, so it cannot show these.
func TestStripeErrorMapping(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		cut    bool // the connection is closed after the request arrived
		want   error
		// for a decline
		declined       models.State
		reason, intent string
	}{
		{name: "card declined", status: 402, body: `{"error":{"type":"card_error","code":"card_declined","decline_code":"generic_decline","message":"Your card was declined.","payment_intent":{"id":"pi_declined","object":"payment_intent","status":"requires_payment_method"}}}`,
			declined: "declined", reason: "Your card was declined.", intent: "pi_declined"},
		{name: "insufficient funds", status: 402, body: `{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}}`,
			declined: "declined", reason: "Your card has insufficient funds."},
		{name: "invalid request", status: 400, body: `{"error":{"type":"invalid_request_error","code":"resource_missing","param":"payment_method","message":"No such PaymentMethod: 'pm_card_unavailable'"}}`, want: ErrRefused},
		{name: "missing resource", status: 404, body: `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such customer: 'cus_x'"}}`, want: ErrRefused},
		{name: "authentication", status: 401, body: `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_***"}}`, want: ErrUnavailable},
		{name: "rate limit", status: 429, body: `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Too many requests hit the API too quickly."}}`, want: ErrUnavailable},
		{name: "api error", status: 500, body: `{"error":{"type":"api_error","message":"An unknown error occurred"}}`, want: ErrInDoubt},
		{name: "same key, other parameters", status: 400, body: `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`, want: ErrInDoubt},
		{name: "same key still running", status: 409, body: `{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key."}}`, want: ErrInDoubt},
		{name: "connection cut after sending", cut: true, want: ErrInDoubt},
		{name: "not final yet", status: 200, body: `{"id":"pi_processing","object":"payment_intent","status":"processing"}`, want: ErrInDoubt},
		{name: "needs the customer", status: 200, body: `{"id":"pi_action","object":"payment_intent","status":"requires_action"}`, want: ErrInDoubt},
		{name: "succeeded", status: 200, body: `{"id":"pi_ok","object":"payment_intent","status":"succeeded"}`, declined: "succeeded", intent: "pi_ok"},
		{name: "refused on confirmation", status: 200, body: `{"id":"pi_refused","object":"payment_intent","status":"requires_payment_method","last_payment_error":{"type":"card_error","message":"Your card was declined."}}`,
			declined: "declined", reason: "Your card was declined.", intent: "pi_refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.cut {
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
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
			charge, err := p.Charge(context.Background(), ChargeRequest{IdempotencyKey: "idem_test", OrderID: "o", AmountCents: 1900, Currency: "USD", PaymentMethod: MethodVisa})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %+v, %v; want an error that is %v", charge, err, tc.want)
				}
				if (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused)) && errors.Is(err, ErrInDoubt) {
					t.Fatalf("%v is both nothing-charged and in doubt", err)
				}
				if errors.Is(err, ErrUnavailable) && errors.Is(err, ErrRefused) {
					t.Fatalf("%v is both a passing and a definitive refusal", err)
				}
				return
			}
			if err != nil || charge.Status != tc.declined || charge.DeclineReason != tc.reason || charge.ID != tc.intent {
				t.Fatalf("got %+v, %v; want status %q, reason %q, id %q", charge, err, tc.declined, tc.reason, tc.intent)
			}
		})
	}
}
