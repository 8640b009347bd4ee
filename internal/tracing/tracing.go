// Package tracing turns OpenTelemetry tracing on when, and only when, the
// SDK's standard environment asks for it, and instruments Gin's requests,
// GORM's statements and the payment provider's HTTP calls.
package tracing

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"
	gormtracing "gorm.io/plugin/opentelemetry/tracing"
)

// ServiceName names the shop's spans when OTEL_SERVICE_NAME does not.
const ServiceName = "shop"

// Configured reports whether the environment asks for traces: an OTLP
// endpoint, or an exporter other than "none" (a service name alone does not).
func Configured(getenv func(string) string) bool {
	exporter := getenv("OTEL_TRACES_EXPORTER")
	if exporter == "none" {
		return false
	}
	return exporter != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Start builds the tracer provider the environment asks for and makes it
// the global one, with W3C propagation; shutdown flushes the spans not yet
// sent. Without traces asked for, it is a no-op that On reports off.
func Start(ctx context.Context, getenv func(string) string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !Configured(getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, errors.Join(errors.New("tracing: OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_*"), err)
	}
	// OTEL_SERVICE_NAME, read by WithFromEnv, overrides the default name.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(ServiceName)), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, nil, errors.Join(errors.New("tracing: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME"), err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return provider, provider.Shutdown, nil
}

// On reports whether tp records spans: not nil, and not Start's no-op.
func On(tp trace.TracerProvider) bool {
	_, off := tp.(noop.TracerProvider)
	return tp != nil && !off
}

// Requests traces each Gin request in a server span; mount it first, so
// that every span of the request is under it.
func Requests(tp trace.TracerProvider) gin.HandlerFunc {
	return otelgin.Middleware(ServiceName, otelgin.WithTracerProvider(tp))
}

// Database traces db's statements when tp is on, without their values
// (passwords' hashes, tokens) and without metrics (those are Prometheus').
func Database(db *gorm.DB, tp trace.TracerProvider) error {
	if !On(tp) {
		return nil
	}
	return db.Use(gormtracing.NewPlugin(gormtracing.WithTracerProvider(tp), gormtracing.WithoutQueryVariables(), gormtracing.WithoutMetrics()))
}

// Transport traces the calls made through base (http.DefaultTransport when
// nil) when tp is on.
func Transport(base http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !On(tp) {
		return base
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp))
}
