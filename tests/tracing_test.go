package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop/shop/internal/tracing"
	"github.com/shop/shop/payments"
)

// traces keeps every span the test's server ends, in memory, and hands
// over each request's server span as it ends: the request's other spans
// ended before it, so they are in the exporter by then.
type traces struct {
	*tracetest.InMemoryExporter
	requests chan sdktrace.ReadOnlySpan
}

func (tr traces) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (tr traces) Shutdown(context.Context) error                  { return nil }
func (tr traces) ForceFlush(context.Context) error                { return nil }
func (tr traces) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanKind() == trace.SpanKindServer {
		tr.requests <- s
	}
}

// withTracing traces the server and its database into tr; before
// withStripe, which gives the Stripe client the same tracer.
func withTracing(t *testing.T, tr traces) option {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tr.InMemoryExporter), sdktrace.WithSpanProcessor(tr))
	return func(deps *setup) {
		if err := tracing.Database(deps.DB, tp); err != nil {
			t.Fatal(err)
		}
		deps.Tracer = tp
	}
}

// next is the next span of a request to route, past those of other
// routes, and the spans of its trace under it.
func (tr traces) next(t *testing.T, route string) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	for root == nil || root.Name() != route {
		select {
		case root = <-tr.requests:
		case <-time.After(10 * time.Second):
			t.Fatalf("no span of %s ended", route)
		}
	}
	var under []sdktrace.ReadOnlySpan
	for _, s := range tr.GetSpans().Snapshots() {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() && s.SpanContext().SpanID() != root.SpanContext().SpanID() {
			under = append(under, s)
		}
	}
	tr.Reset()
	return root, under
}

// attrs is a span's attributes by key, as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// wantRequest checks the request span's idempotency marks, and counts the
// database and HTTP client spans under it: the client sent no trace
// context, so the request span is its trace's root.
func wantRequest(t *testing.T, root sdktrace.ReadOnlySpan, under []sdktrace.ReadOnlySpan, marks map[string]string) (db, http int) {
	t.Helper()
	name := root.Name()
	if root.Parent().IsValid() {
		t.Errorf("%s: the request span has a parent", name)
	}
	got := attrs(root)
	for k, v := range marks {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q (all: %v)", name, k, got[k], v, got)
		}
	}
	for _, s := range under {
		if s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: span %q is not a client span", name, s.Name())
			continue
		}
		a := attrs(s)
		switch {
		case a["db.query.text"] != "":
			db++
		case a["http.request.method"] != "":
			http++
		}
	}
	return db, http
}

// Traced, a fresh order is a request span named by its route, marked
// claimed and stored, with its statements under it; its repeat is marked
// replayed from memory, and on an instance without the answer cached,
// from the database; a payment through Stripe has Stripe's call under it.
func TestTracingShowsAnOrderItsReplaysAndAPayment(t *testing.T) {
	tr := traces{tracetest.NewInMemoryExporter(), make(chan sdktrace.ReadOnlySpan, 64)}
	fake, base := newFakeStripe(t)
	e := newEnv(t, withTracing(t, tr), withStripe(base, http.DefaultTransport))
	token := e.signUp("traced@example.com")
	place := request{method: "POST", path: "/api/v1/orders", token: token, key: key("traced"), body: orderBody(e.products()[0], 1)}
	r := e.do(place)
	if r.Status != http.StatusCreated {
		t.Fatalf("create order: %d %s", r.Status, r.Body)
	}
	root, under := tr.next(t, "POST /api/v1/orders")
	if db, _ := wantRequest(t, root, under, map[string]string{
		"idempotency.claimed": "true", "idempotency.stored": "true", "http.route": "/api/v1/orders",
	}); db == 0 {
		t.Error("no database span under the order's request")
	}

	if r := e.do(place); !r.replayed() {
		t.Fatalf("repeat not replayed: %d %s", r.Status, r.Body)
	}
	root, under = tr.next(t, "POST /api/v1/orders")
	wantRequest(t, root, under, map[string]string{"idempotency.replayed": "true", "idempotency.replayed_from": "memory"})
	if _, ok := attrs(root)["idempotency.claimed"]; ok {
		t.Error("a replay is marked claimed")
	}

	uncached := e.deps
	uncached.ReplayCacheBytes = -1
	other := httptest.NewServer(newServer(t, uncached))
	t.Cleanup(other.Close)
	elsewhere := *e
	elsewhere.url = other.URL
	if r := elsewhere.do(place); !r.replayed() {
		t.Fatalf("repeat on another instance not replayed: %d %s", r.Status, r.Body)
	}
	root, under = tr.next(t, "POST /api/v1/orders")
	wantRequest(t, root, under, map[string]string{"idempotency.replayed": "true", "idempotency.replayed_from": "database"})

	orderID := r.json(t)["id"].(string)
	if r := e.do(e.payRequest(token, orderID, "pay-traced", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay through the fake Stripe: %d %s", r.Status, r.Body)
	}
	root, under = tr.next(t, "POST /api/v1/orders/:id/payments")
	db, calls := wantRequest(t, root, under, map[string]string{"idempotency.claimed": "true", "idempotency.stored": "true"})
	if db == 0 || calls != fake.charges() || calls != 1 {
		t.Errorf("the payment's request has %d database spans and %d HTTP client spans, for %d charges; want some, and 1 for 1", db, calls, fake.charges())
	}
}

// Off unless configured: with none of the SDK's variables set, Start gives
// a no-op provider, which instruments nothing.
func TestTracingIsOffUnlessConfigured(t *testing.T) {
	for _, tc := range []struct {
		env map[string]string
		on  bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "shop"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
	} {
		getenv := func(k string) string { return tc.env[k] }
		if got := tracing.Configured(getenv); got != tc.on {
			t.Errorf("Configured(%v) = %v, want %v", tc.env, got, tc.on)
		}
	}
	tp, shutdown, err := tracing.Start(context.Background(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, span := tp.Tracer("test").Start(context.Background(), "unrecorded")
	if tracing.On(tp) || span.IsRecording() {
		t.Fatalf("unconfigured, the provider %T records spans", tp)
	}
	if base := http.DefaultTransport; tracing.Transport(base, tp) != base {
		t.Error("unconfigured, the transport is wrapped")
	}
}
