package consumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/internal/pipeline"
)

// Option changes how a Consumer runs beyond its Config.
type Option func(*pipeline.Options)

// WithLogger sends the consumer's logs (claims, drains, dead letters,
// progress) to logger. Default: none.
func WithLogger(logger *slog.Logger) Option {
	return func(o *pipeline.Options) { o.Logger = logger }
}

// WithRegisterer registers the consumer's metrics (prefix patchflow_) with
// reg while Run runs: one consumer at a time per registry (Run refuses to
// start beside another's metrics), and they are unregistered when Run
// returns. Default: a registry of the consumer's own, with Go and process
// collectors, served by WithHTTP's /metrics. With reg, /metrics serves reg
// when it is also a prometheus.Gatherer, else prometheus.DefaultGatherer.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *pipeline.Options) { o.Registerer = reg }
}

// WithHTTP serves /metrics, /healthz (the process runs), /readyz (the
// consumer is in its group, no partition pinned or stalled past
// Config.ReadyPinLimit, no dead-letter write failing, every health check
// passing) and the status page /status with its JSON twin /status.json on
// addr ("127.0.0.1:9000", say) while Run runs. Default: no HTTP.
func WithHTTP(addr string) Option {
	return func(o *pipeline.Options) { o.HTTPAddr = addr }
}

// WithPprof adds Go's profiler, net/http/pprof's /debug/pprof/, to
// WithHTTP's server. Off by default: a profile costs CPU while it is taken,
// and the goroutine dump shows the records in flight, so serve it only on
// an address the operator alone reaches.
func WithPprof() Option {
	return func(o *pipeline.Options) { o.Pprof = true }
}

// WithHealthCheck adds a dependency /readyz and Ready judge: check runs
// every second (2 s at most each) and the consumer reads as not ready once
// it has failed without a break for grace. check's errors are shown: keep
// secrets out of them.
//
// A check named as a dependency the handler reports (DependencyReporter,
// FailedIn) also judges that dependency's transient failures for a record
// that fails while no other call reaches it (its partition waiting behind
// it, say): the failure counts towards the record's dead letter only when a
// check passed since its previous failure, none failed, and no other record
// failed there. Without such a check the record is retried as long as
// nothing else is served, as in an outage. So keep the check on the path
// the handler's calls take: a check that passes while those calls fail
// would dead-letter records in an outage of a quiet process.
func WithHealthCheck(name string, grace time.Duration, check func(context.Context) error) Option {
	return func(o *pipeline.Options) {
		o.Checks = append(o.Checks, pipeline.HealthCheck{Name: name, Grace: grace, Check: check})
	}
}
