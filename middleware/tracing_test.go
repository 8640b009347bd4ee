package middleware

import (
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The request's span carries what Observe counts for the request, one
// idempotency.<outcome> attribute each, and where a replay came from.
func TestTheRequestSpanCarriesWhatObserveCounts(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	spans := make(chan sdktrace.ReadOnlySpan, 1)
	h := newHarness(t, withFirst(func(c *gin.Context) {
		ctx, span := tp.Tracer("test").Start(c.Request.Context(), "request")
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		span.End()
		spans <- span.(sdktrace.ReadOnlySpan)
	}))
	for _, tc := range []struct {
		name string
		call call
		want []Outcome
		from string
	}{
		{"fresh", call{key: "k1", body: `{"n":1}`}, []Outcome{OutcomeClaimed, OutcomeStored}, ""},
		{"repeat", call{key: "k1", body: `{"n":1}`}, []Outcome{OutcomeReplayed}, "memory"},
		{"another body", call{key: "k1", body: `{"n":2}`}, []Outcome{OutcomeMismatch}, ""},
		{"failed", call{key: "k2", body: `{"n":1}`, path: "/widgets/1?status=502"}, []Outcome{OutcomeClaimed, OutcomeReleased}, ""},
		{"its retry", call{key: "k2", body: `{"n":1}`}, []Outcome{OutcomeRetried, OutcomeStored}, ""},
	} {
		before := len(h.observed())
		h.do(tc.call)
		span := <-spans
		if observed := h.observed()[before:]; !slices.Equal(observed, tc.want) {
			t.Fatalf("%s: observed %v, want %v", tc.name, observed, tc.want)
		}
		var marked []Outcome
		from := ""
		for _, kv := range span.Attributes() {
			switch {
			case kv.Key == "idempotency.replayed_from":
				from = kv.Value.AsString()
			case strings.HasPrefix(string(kv.Key), "idempotency.") && kv.Value.AsBool():
				marked = append(marked, Outcome(strings.TrimPrefix(string(kv.Key), "idempotency.")))
			}
		}
		if !slices.Equal(marked, tc.want) || from != tc.from {
			t.Errorf("%s: the span is marked %v, replayed from %q; want %v, %q", tc.name, marked, from, tc.want, tc.from)
		}
	}
}
