// Package pipeline holds a consumer.Consumer's options, and the ones the
// module's own code may set beyond the public ones: the bridge itself (for
// the listener's tests, the demo and the benchmark), the listener's metrics
// (its domain handler reports into them) and its settings rows for the
// status page. consumer.Option is opaque: module code makes one of these
// with As, and code outside the module cannot name this package.
package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/telemetry"
)

// Options are what a consumer is given beside its Config and handler.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	HTTPAddr   string
	// Pprof adds net/http/pprof's /debug/pprof/ to the HTTP server.
	Pprof bool
	// ReleaseToken, when set, adds the operator's release route to the HTTP
	// server (telemetry.ReleaseHandler), guarded by this token.
	ReleaseToken string
	Checks       []HealthCheck
	// TracerProvider, when set, traces each handler attempt and dead
	// letter (consumer.WithTracerProvider).
	TracerProvider trace.TracerProvider

	Started  func(*actors.Bridge)
	Metrics  *telemetry.Metrics
	Settings []telemetry.Setting
}

// Wrap makes a consumer.Option of f; package consumer sets it as it
// initialises (this package cannot import it).
var Wrap func(f func(*Options)) any

// As returns f as the option type T (consumer.Option):
// pipeline.As[consumer.Option](pipeline.Metrics(m)).
func As[T any](f func(*Options)) T { return Wrap(f).(T) }

// HealthCheck is a dependency /readyz watches (consumer.WithHealthCheck).
type HealthCheck struct {
	Name  string
	Grace time.Duration
	Check func(context.Context) error
}

// Started returns an option that receives the bridge once it exists.
func Started(f func(*actors.Bridge)) func(*Options) {
	return func(o *Options) { o.Started = f }
}

// Metrics returns an option that puts the consumer's metrics in m instead
// of a registry of their own (the listener's domain handler reports into
// m too).
func Metrics(m *telemetry.Metrics) func(*Options) {
	return func(o *Options) { o.Metrics = m }
}

// Settings returns an option that shows rows on the status page instead
// of the consumer's own configuration.
func Settings(rows []telemetry.Setting) func(*Options) {
	return func(o *Options) { o.Settings = rows }
}
