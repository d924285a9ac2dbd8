package listener

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
)

// TracesExporters are OTEL_TRACES_EXPORTER's values: OpenTelemetry's own
// names for no traces, OTLP over HTTP, and the console (stdout).
var TracesExporters = []string{"none", "otlp", "console"}

// tracesShutdownTimeout bounds flushing the spans still batched at exit.
const tracesShutdownTimeout = 5 * time.Second

// tracerProvider is the listener's trace pipeline for exporter (one of
// TracesExporters), batched; nil for "none". The OTLP exporter reads
// OpenTelemetry's own environment (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS, ...), the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. shutdown flushes and closes it.
func tracerProvider(ctx context.Context, exporter, version string) (tp *sdktrace.TracerProvider, shutdown func(), err error) {
	var exp sdktrace.SpanExporter
	switch exporter {
	case "", "none":
		return nil, func() {}, nil
	case "otlp":
		exp, err = otlptracehttp.New(ctx)
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	default:
		return nil, nil, fmt.Errorf("traces exporter %q: want one of none, otlp, console", exporter)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("traces exporter %s: %w", exporter, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("patchflow-listener"), semconv.ServiceVersion(version)))
	if err != nil {
		res = resource.Default() // a schema conflict between the two: the default's attributes alone
	}
	if _, set := os.LookupEnv("OTEL_SERVICE_NAME"); set {
		res = resource.Default() // the operator's name wins
	}
	tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracesShutdownTimeout)
		defer cancel()
		_ = tp.Shutdown(ctx)
	}, nil
}
