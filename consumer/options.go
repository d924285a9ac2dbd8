package consumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/internal/pipeline"
)

// Option changes how a Consumer runs beyond its Config: WithLogger,
// WithRegisterer, WithHTTP, WithPprof, WithRelease, WithHealthCheck. The
// zero Option is refused by New.
type Option struct{ apply func(*pipeline.Options) }

func init() {
	pipeline.Wrap = func(f func(*pipeline.Options)) any { return Option{f} }
}

// WithLogger sends the consumer's logs (claims, drains, dead letters,
// progress) to logger. Default: none.
func WithLogger(logger *slog.Logger) Option {
	return Option{func(o *pipeline.Options) { o.Logger = logger }}
}

// WithRegisterer registers the consumer's metrics (prefix patchflow_) with
// reg while Run runs: one consumer at a time per registry (Run refuses to
// start beside another's metrics), and they are unregistered when Run
// returns. Default: a registry of the consumer's own, with Go and process
// collectors, served by WithHTTP's /metrics. With reg, /metrics serves reg
// when it is also a prometheus.Gatherer, else prometheus.DefaultGatherer.
func WithRegisterer(reg prometheus.Registerer) Option {
	return Option{func(o *pipeline.Options) { o.Registerer = reg }}
}

// WithHTTP serves /metrics, /healthz (the process runs), /readyz (the
// consumer is in its group, no partition pinned or stalled past
// Config.ReadyPinLimit, no dead-letter write failing, every health check
// passing) and the status page /status with its JSON twin /status.json on
// addr ("127.0.0.1:9000", say) while Run runs, within Config.HTTP's
// bounds. Default: no HTTP.
func WithHTTP(addr string) Option {
	return Option{func(o *pipeline.Options) { o.HTTPAddr = addr }}
}

// WithPprof adds Go's profiler, net/http/pprof's /debug/pprof/, to
// WithHTTP's server, but for /debug/pprof/cmdline (404): the command line
// may carry secrets given as flags. Off by default: a profile costs CPU
// while it is taken, and the goroutine dump shows the records in flight,
// so serve it only on an address the operator alone reaches.
func WithPprof() Option {
	return Option{func(o *pipeline.Options) { o.Pprof = true }}
}

// WithRelease adds to WithHTTP's server the operator's release of a
// failing record to the dead-letter topic: POST
// /records/release?topic=T&partition=P&offset=O with the header
// "Authorization: Bearer <token>" (Consumer.Release does the same from
// code). It is for a record held because nothing can judge its failures, or
// one an operator will not wait for through an outage. The route exists only
// with this option, and token (at least 16 characters; keep it in a secret)
// is required on every request. Default: no such route.
func WithRelease(token string) Option {
	return Option{func(o *pipeline.Options) { o.ReleaseToken = token }}
}

// WithHealthCheck adds a dependency /readyz and Ready judge: check runs
// every second (2 s at most each) and the consumer reads as not ready once
// it has failed without a break for grace. check's errors are shown: keep
// secrets out of them.
//
// A check named as a dependency the handler reports (DependencyReporter,
// FailedIn) is also evidence for the retry rule: a failed check makes the
// failures at that dependency shared (an outage) until a check passes; a
// check that has been passing, with at most one other record failing
// there, makes a record's failure its own even when no other record called
// the dependency just after it (its partition waiting behind it, a quiet
// topic). Without such a check that record is held, retried and reported,
// until other records give evidence. So keep the check on the path the
// handler's calls take (the tables and statements they use, a real request
// of the service): a check that passes while those calls fail would
// dead-letter records of a quiet process in an outage.
func WithHealthCheck(name string, grace time.Duration, check func(context.Context) error) Option {
	return Option{func(o *pipeline.Options) {
		o.Checks = append(o.Checks, pipeline.HealthCheck{Name: name, Grace: grace, Check: check})
	}}
}
