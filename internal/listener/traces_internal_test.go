package listener

import (
	"context"
	"strings"
	"testing"
)

// OTEL_TRACES_EXPORTER takes OpenTelemetry's names: none builds nothing,
// console and otlp a provider that shuts down, anything else stops the
// listener at start naming the setting.
func TestTracesExporterSetting(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing listens: the flush fails fast
	ctx := context.Background()
	tp, shutdown, err := tracerProvider(ctx, "none", "v")
	if err != nil || tp != nil {
		t.Fatalf("none: %v, %v", tp, err)
	}
	shutdown()
	for _, e := range []string{"console", "otlp"} {
		tp, shutdown, err := tracerProvider(ctx, e, "v")
		if err != nil || tp == nil {
			t.Fatalf("%s: %v, %v", e, tp, err)
		}
		_, span := tp.Tracer("t").Start(ctx, "s")
		span.End()
		shutdown() // flushes within its bound, even with no OTLP collector listening
	}
	env := map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}
	_, _, err = Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("an unknown exporter: %v, want an error naming OTEL_TRACES_EXPORTER", err)
	}
}
