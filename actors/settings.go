package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/patchflow/patchflow/actors/blame"
	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/actors/ordering"
)

// Settings tune the pipeline. The zero value is not valid; start from
// DefaultSettings.
type Settings struct {
	// InFlightPerPartition (S) bounds the records admitted and not finished in
	// one partition, held-back records included.
	InFlightPerPartition int
	// InFlightTotal (G) bounds the records admitted and not finished in the
	// whole process: the limit when Concurrency is fixed, its ceiling when
	// adaptive.
	InFlightTotal int
	// InFlightBytes bounds the memory of the records admitted and not
	// finished in the whole process, in bytes as the handler counts them
	// (RecordSizer; the wire size otherwise): admission waits while the
	// next record does not fit, first come first served. A record larger
	// than the whole budget runs alone. A record waiting for the retry of a
	// failure that waits for evidence lends its bytes to the records
	// admitted meanwhile, its evidence: then the records running weigh at
	// most twice the budget. 0: no byte bound.
	InFlightBytes int64
	// Concurrency is how the process-wide in-flight limit is set:
	// ConcurrencyFixed keeps it at InFlightTotal; ConcurrencyAdaptive moves
	// it between ConcurrencyFloor and InFlightTotal from the handler's
	// latency against its no-load baseline and its transient failures
	// (package limit). InFlightPerPartition stays a hard limit either way.
	Concurrency ConcurrencyMode
	// ConcurrencyFloor is the adaptive limit's floor; a floor above
	// InFlightTotal is InFlightTotal.
	ConcurrencyFloor int
	// ConcurrencyLaw is the adaptive limit's control law.
	ConcurrencyLaw limit.Law
	// ConcurrencyTolerance is the multiple of the no-load latency the
	// adaptive limit treats as no queue (limit.Config.Tolerance): 1 keeps
	// the handler near its no-load latency; more buys the throughput a
	// downstream with a soft knee still gives, for latency.
	ConcurrencyTolerance float64
	// ConcurrencySlowStart: the adaptive limit doubles each window from
	// the start while latency holds (limit.Config.SlowStart). On by
	// default; off only to measure what it buys (make bench, scenario 9).
	ConcurrencySlowStart bool
	// Ordering is the ordering guarantee within a partition.
	Ordering ordering.Mode
	// DrainTimeout bounds how long a partition waits for in-flight records at
	// the end of its claim before it cancels them. Keep it well under sarama's
	// Consumer.Group.Rebalance.Timeout.
	DrainTimeout time.Duration
	// MaxAttempts is how many of a record's failures may be its own before it
	// is dead-lettered. A failure (transient, unclassified or a panic) is
	// its own when the retry rule (package blame) judges it so: other
	// records' calls to the dependency it names, or the other records
	// themselves when it names none, were served just after it, or that
	// dependency's health check passed. Failures during shared trouble do
	// not count: they are retried without limit, with backoff up to
	// BackoffMax; a failure nothing can judge holds its record. Permanent
	// failures are dead-lettered at once.
	MaxAttempts int
	// AttemptTimeout bounds one handler attempt (its context's deadline); 0
	// means no bound. A record failing on its own, while its neighbours
	// succeed, is therefore dead-lettered within OwnFailureBound. Keep it well above normal handler times, queueing for
	// the database included, or slow attempts under load count as own
	// failures.
	AttemptTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff between attempts
	// and between dead-letter write retries. A retry also waits for its
	// failure's verdict (EvidenceWindow at most), and a record waiting out a
	// shared outage retries as soon as its dependency serves again.
	BackoffMin, BackoffMax time.Duration
	// EvidenceWindow is how long after a failure the calls other records
	// start, and the dependency's health checks, count as evidence of whose
	// failure it was (package blame); a dependency whose served calls take
	// longer gets twice their mean time. Keep it above the health checks'
	// interval (1 s), so that a check starts within every window.
	EvidenceWindow time.Duration
	// SpanPerPartition bounds the offsets a partition may hold between its
	// watermark and its highest admitted offset: the bridge admits nothing at
	// or past watermark + span, so a record that pins the watermark stops
	// admission there (the partition is span-blocked) instead of letting
	// every record after it finish uncommitted. 0 means DefaultSpanFactor ×
	// InFlightPerPartition; see Span. Otherwise at least
	// InFlightPerPartition.
	SpanPerPartition int
	// CommitMetadataMaxBytes bounds the commit metadata that carries the
	// offsets finished above the watermark (ledger.Commit); keep it at or
	// below the brokers' offset.metadata.max.bytes (4,096 by default), which
	// refuses the whole commit otherwise. Metadata that would pass it speaks
	// of fewer offsets, never more. 0 sends none: only the watermark
	// survives a crash or a handover.
	CommitMetadataMaxBytes int
	// ConsumerGroup is written into dead-letter envelopes.
	ConsumerGroup string
}

// ConcurrencyMode is how the process-wide in-flight limit is set. The zero
// value is ConcurrencyFixed.
type ConcurrencyMode int

const (
	// ConcurrencyFixed: the limit is InFlightTotal.
	ConcurrencyFixed ConcurrencyMode = iota
	// ConcurrencyAdaptive: the limit moves between ConcurrencyFloor and
	// InFlightTotal.
	ConcurrencyAdaptive
)

// String returns the mode's setting name.
func (m ConcurrencyMode) String() string {
	switch m {
	case ConcurrencyFixed:
		return "fixed"
	case ConcurrencyAdaptive:
		return "adaptive"
	}
	return fmt.Sprintf("ConcurrencyMode(%d)", int(m))
}

// ParseConcurrencyMode reads a mode's setting name.
func ParseConcurrencyMode(s string) (ConcurrencyMode, error) {
	switch s {
	case "fixed":
		return ConcurrencyFixed, nil
	case "adaptive":
		return ConcurrencyAdaptive, nil
	}
	return 0, fmt.Errorf("unknown concurrency mode %q: want adaptive or fixed", s)
}

// DefaultConcurrencyFloor is the adaptive limit's default floor.
const DefaultConcurrencyFloor = 8

// LimitConfig returns the adaptive controller's configuration.
func (s Settings) LimitConfig() limit.Config {
	cfg := limit.DefaultConfig(min(s.ConcurrencyFloor, s.InFlightTotal), s.InFlightTotal)
	cfg.Law = s.ConcurrencyLaw
	cfg.Tolerance = s.ConcurrencyTolerance
	cfg.SlowStart = s.ConcurrencySlowStart
	return cfg
}

// DefaultSpanFactor is the span per partition, in multiples of
// InFlightPerPartition, when SpanPerPartition is 0.
const DefaultSpanFactor = 64

// DefaultCommitMetadataMaxBytes is the brokers' default
// offset.metadata.max.bytes.
const DefaultCommitMetadataMaxBytes = 4096

// DefaultInFlightBytes is the default byte budget of the records in flight:
// a quarter of the 512 MiB the deployment's pod may use, leaving the rest to
// sarama's fetch buffers, the read-ahead, the clients' answer budget and
// the runtime (docs/reliability.md, "Hostile input").
const DefaultInFlightBytes = 128 << 20

// Span returns the effective span per partition (see SpanPerPartition).
func (s Settings) Span() int {
	if s.SpanPerPartition > 0 {
		return s.SpanPerPartition
	}
	return DefaultSpanFactor * s.InFlightPerPartition
}

// DefaultSettings returns the defaults documented in docs/configuration.md.
func DefaultSettings() Settings {
	return Settings{
		InFlightPerPartition: 64,
		InFlightTotal:        1024,
		InFlightBytes:        DefaultInFlightBytes,
		Concurrency:          ConcurrencyAdaptive,
		ConcurrencyFloor:     DefaultConcurrencyFloor,
		ConcurrencyLaw:       limit.Gradient,
		ConcurrencyTolerance: 1,
		ConcurrencySlowStart: true,
		Ordering:             ordering.ByKey,
		DrainTimeout:         20 * time.Second,
		MaxAttempts:          5,
		AttemptTimeout:       2 * time.Minute,
		BackoffMin:           100 * time.Millisecond,
		BackoffMax:           10 * time.Second,
		EvidenceWindow:       blame.DefaultConfig().Window,
		// SpanPerPartition 0: DefaultSpanFactor × InFlightPerPartition.
		CommitMetadataMaxBytes: DefaultCommitMetadataMaxBytes,
	}
}

// Validate returns an error naming the first invalid setting.
func (s Settings) Validate() error {
	var errs []error
	if s.InFlightPerPartition < 1 {
		errs = append(errs, fmt.Errorf("in-flight per partition must be at least 1, got %d", s.InFlightPerPartition))
	}
	if s.InFlightTotal < 1 {
		errs = append(errs, fmt.Errorf("in-flight total must be at least 1, got %d", s.InFlightTotal))
	}
	if s.InFlightBytes < 0 {
		errs = append(errs, fmt.Errorf("in-flight bytes must be 0 (no bound) or positive, got %d", s.InFlightBytes))
	}
	switch s.Concurrency {
	case ConcurrencyFixed:
	case ConcurrencyAdaptive:
		if err := s.LimitConfig().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("adaptive concurrency: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown concurrency mode %v", s.Concurrency))
	}
	if s.Ordering < ordering.ByKey || s.Ordering > ordering.Unordered {
		errs = append(errs, fmt.Errorf("unknown ordering %v", s.Ordering))
	}
	if s.DrainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("drain timeout must be positive, got %v", s.DrainTimeout))
	}
	if s.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts must be at least 1, got %d", s.MaxAttempts))
	}
	if s.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("attempt timeout must not be negative, got %v", s.AttemptTimeout))
	}
	if s.BackoffMin <= 0 || s.BackoffMax < s.BackoffMin {
		errs = append(errs, fmt.Errorf("backoff must satisfy 0 < min <= max, got min %v max %v", s.BackoffMin, s.BackoffMax))
	}
	if s.EvidenceWindow <= 0 {
		errs = append(errs, fmt.Errorf("evidence window must be positive, got %v", s.EvidenceWindow))
	}
	if s.SpanPerPartition < 0 || (s.SpanPerPartition > 0 && s.SpanPerPartition < s.InFlightPerPartition) {
		errs = append(errs, fmt.Errorf("span per partition must be 0 (the default, %d × in-flight per partition) or at least the in-flight per partition (%d), got %d",
			DefaultSpanFactor, s.InFlightPerPartition, s.SpanPerPartition))
	}
	if s.CommitMetadataMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("commit metadata limit must not be negative, got %d", s.CommitMetadataMaxBytes))
	}
	return errors.Join(errs...)
}

// EvidenceOverdraft is the most offsets past its span a partition admits as
// evidence for the record pinning its watermark: evidenceBatch for each of
// the MaxAttempts failures it needs judged own, twice over for the failures
// whose verdict the lent records cannot decide (the first after an outage is
// shared with the records coming through it).
func (s Settings) EvidenceOverdraft() int { return 2 * s.MaxAttempts * evidenceBatch }

// BlameConfig is the retry rule's configuration (package blame).
func (s Settings) BlameConfig() blame.Config {
	return blame.Config{Window: s.EvidenceWindow, Enough: blame.DefaultConfig().Enough}
}

// OwnFailureBound is the longest a record that fails on its own (its
// dependencies keep serving other records just after each of its failures)
// can hold its partition before it is dead-lettered, when its handler
// honours the attempt timeout and the dependency's served calls take less
// than half the evidence window (a failing record's own hung calls do not
// count): MaxAttempts attempts of at most AttemptTimeout,
// each followed by the longer of its backoff (BackoffMax at most) and its
// verdict (EvidenceWindow at most). Zero when AttemptTimeout is zero (no
// bound).
func (s Settings) OwnFailureBound() time.Duration {
	if s.AttemptTimeout <= 0 {
		return 0
	}
	return time.Duration(s.MaxAttempts) * (s.AttemptTimeout + max(s.BackoffMax, s.EvidenceWindow))
}
