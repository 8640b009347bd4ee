package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// fakeRefund is one refund in the fake Stripe's ledger.
type fakeRefund struct {
	paymentIntent string
	body          []byte
}

// serveRefunds is Stripe's Refunds API with its idempotency: POST
// /v1/refunds makes a refund under a new key (and replays the first answer
// under a known one, or an idempotency_error for other parameters), and
// GET /v1/refunds?payment_intent= lists a PaymentIntent's refunds.
func (f *fakeStripe) serveRefunds(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		f.listRefunds(w, r.URL.Query().Get("payment_intent"))
		return
	}
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	if f.refuseRefund != "" {
		f.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","code":%q,"message":"Charge ch_fake has already been refunded."}}`, f.refuseRefund)
		return
	}
	prior, seen := f.refundsByKey[key]
	if !seen {
		status := f.refundStatus
		if status == "" {
			status = "succeeded"
		}
		prior = fakeIntent{params: form.Encode(), body: fmt.Appendf(nil,
			`{"id":"re_fake%d","object":"refund","status":%q,"amount":%s,"currency":"usd","payment_intent":%q,"metadata":{"idempotency_key":%q,"order_id":%q}}`,
			len(f.refundsKept)+1, status, form.Get("amount"), form.Get("payment_intent"), key, form.Get("metadata[order_id]"))}
		f.refundsByKey[key] = prior
		f.refundsKept = append(f.refundsKept, fakeRefund{paymentIntent: form.Get("payment_intent"), body: prior.body})
	}
	lose := f.loseN > 0
	f.loseN--
	f.mu.Unlock()
	switch {
	case lose:
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	case prior.params != form.Encode():
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`))
	default:
		w.Write(prior.body)
	}
}

func (f *fakeStripe) listRefunds(w http.ResponseWriter, paymentIntent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var data []string
	for _, refund := range f.refundsKept {
		if refund.paymentIntent == paymentIntent {
			data = append(data, string(refund.body))
		}
	}
	fmt.Fprintf(w, `{"object":"list","url":"/v1/refunds","has_more":false,"data":[%s]}`, strings.Join(data, ","))
}

// refunds is the number of refunds in the fake Stripe's ledger.
func (f *fakeStripe) refunds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.refundsKept)
}
