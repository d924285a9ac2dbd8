// Package telemetry exposes the listener to operators: Prometheus metrics
// (prefix patchflow_), /healthz and /readyz, and the HTTP server that
// serves them within bounds (Serve). Per-partition values are read
// from the bridge at scrape time, counters from its Stats, so the pipeline
// keeps no second set of books.
package telemetry

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/version"
	"github.com/patchflow/patchflow/messages"
)

// Metrics holds the listener's metrics and implements actors.Observer.
type Metrics struct {
	// Registry is where the metrics are registered; Gatherer what /metrics
	// serves (the same registry unless NewIn was given a Registerer that
	// is no Gatherer).
	Registry   prometheus.Registerer
	Gatherer   prometheus.Gatherer
	dependency *prometheus.HistogramVec
	// skipReasons and validationReasons are the reasons exported from the
	// start (KnowReasons).
	skipReasons, validationReasons []messages.Reason
	handler                        *prometheus.HistogramVec
	drains                         *prometheus.HistogramVec
	claims                         *prometheus.CounterVec
	buildInfo                      prometheus.Gauge
	// relay is the outbox relay's source (AttachRelay); nil before.
	relay atomic.Pointer[relaySource]
	// topics is the group's lag per topic (AttachTopicLag).
	topics topicLag
}

// handlerBuckets are the upper bounds of patchflow_handler_duration_seconds:
// four to a doubling (each 2^¼ ≈ 1.19 × the last) from 1 ms to 32.768 s. A
// quantile read from the histogram is then good to about a fifth, where
// buckets that double leave a p50 anywhere within a factor of two, too
// coarse to tell a handler queueing a little from one at its unloaded
// time.
var handlerBuckets = prometheus.ExponentialBucketsRange(0.001, 32.768, 61)

// New returns the metrics in a registry of their own, with Go and process
// collectors; AttachBridge adds the pipeline's own once the bridge exists.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := NewIn(reg)
	if err != nil {
		panic(err) // a fresh registry refuses nothing
	}
	return m
}

// NewIn returns the metrics registered in reg (a program's own registry,
// which may hold other metrics); /metrics then serves reg when it is a
// prometheus.Gatherer, else prometheus.DefaultGatherer.
func NewIn(reg prometheus.Registerer) (*Metrics, error) {
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		g = prometheus.DefaultGatherer
	}
	m := &Metrics{
		Registry: reg, Gatherer: g,
		dependency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "patchflow_dependency_duration_seconds", Help: "Calls the handler reported to each dependency, by result (ok: served; refused: answered with a refusal; error: no answer; cancelled).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"dependency", "result"}),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "patchflow_handler_duration_seconds", Help: "Handler attempts by outcome (ok, skipped, transient, permanent, unknown, cancelled, panic).",
			Buckets: handlerBuckets}, []string{"outcome"}),
		drains: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "patchflow_drain_duration_seconds", Help: "Time to drain a partition at the end of its claim.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"timed_out"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patchflow_claims_total", Help: "Partitions claimed (each rebalance that gives this process a partition)."}, []string{"topic"}),
		buildInfo: buildInfoGauge(version.Get()),
	}
	for i, c := range m.own() {
		if err := reg.Register(c); err != nil {
			for _, done := range m.own()[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register the consumer's metrics (one consumer at a time per registry): %w", err)
		}
	}
	return m, nil
}

// own are the collectors NewIn registers.
func (m *Metrics) own() []prometheus.Collector {
	return []prometheus.Collector{m.handler, m.drains, m.claims, m.dependency, m.buildInfo}
}

// buildInfoGauge is patchflow_build_info: 1, labelled with the build, so a
// dashboard or an alert can tell which build each replica runs.
func buildInfoGauge(v version.Info) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "patchflow_build_info", Help: "1, labelled with the running build's version, revision and Go version.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "goversion": v.GoVersion}})
	g.Set(1)
	return g
}

// AttachReadiness exports r's last verdict as patchflow_ready (1 ready, 0
// not), the value /readyz answers, so an alert can see a replica out of
// service however its probes are set. detach unregisters it.
func (m *Metrics) AttachReadiness(r *Readiness) (detach func(), err error) {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "patchflow_ready", Help: "1 while the process is ready (/readyz answers 200), 0 while it is not or has not yet judged: the reason is in the log and on /readyz."},
		func() float64 {
			if r.Ready() {
				return 1
			}
			return 0
		})
	if err := m.Registry.Register(g); err != nil {
		return nil, fmt.Errorf("register the readiness metric (one consumer at a time per registry): %w", err)
	}
	return func() { m.Registry.Unregister(g) }, nil
}

// AttachBridge exports the bridge's per-partition state and counters. It
// fails when the registry holds a bridge's metrics already (one consumer at
// a time per registry).
//
// The returned detach unregisters them, so that another bridge can attach
// once this one's run is over.
func (m *Metrics) AttachBridge(b *actors.Bridge) (detach func(), err error) {
	c := &bridgeCollector{skipReasons: m.skipReasons, validationReasons: m.validationReasons, partitions: b.Partitions,
		stats: func() actors.StatsSnapshot { return b.Stats().Snapshot() }, concurrency: b.Concurrency}
	if err := m.Registry.Register(c); err != nil {
		return nil, fmt.Errorf("register the consumer's metrics (one consumer at a time per registry): %w", err)
	}
	return func() { m.Registry.Unregister(c) }, nil
}

// Unregister removes the metrics NewIn registered (not a bridge's: its
// detach does), so that the registry can take another consumer's.
func (m *Metrics) Unregister() {
	for _, c := range m.own() {
		m.Registry.Unregister(c)
	}
}

// Dependency records one call a handler reported to dependency (see
// consumer.DependencyReporter).
func (m *Metrics) Dependency(dependency string, d time.Duration, err error) {
	result := "ok"
	switch messages.ClassOf(err) {
	case messages.ErrorClass_ERROR_CLASS_UNSPECIFIED:
	case messages.ErrorClass_ERROR_CLASS_PERMANENT:
		result = "refused"
	case messages.ErrorClass_ERROR_CLASS_CANCELLED:
		result = "cancelled"
	default:
		result = "error"
	}
	m.dependency.WithLabelValues(dependency, result).Observe(d.Seconds())
}

// HandlerDone implements actors.Observer.
func (m *Metrics) HandlerDone(outcome string, d time.Duration) {
	m.handler.WithLabelValues(outcome).Observe(d.Seconds())
}

// DrainDone implements actors.Observer.
func (m *Metrics) DrainDone(d time.Duration, timedOut bool) {
	m.drains.WithLabelValues(strconv.FormatBool(timedOut)).Observe(d.Seconds())
}

// ClaimStarted implements actors.Observer.
func (m *Metrics) ClaimStarted(topic string, _ int32) { m.claims.WithLabelValues(topic).Inc() }

// KnowReasons names the reasons the handler can give, so that each is
// exported from the start (at 0) and a rate or an alert on one works before
// its first record: skip reasons, and the validation reasons of broken
// records (the failure classes, messages.DeadLetterReasons, always are).
// Call it before the metrics are served.
func (m *Metrics) KnowReasons(skip, validation []messages.Reason) {
	m.skipReasons, m.validationReasons = skip, validation
}

// skippedByReason is a topic's count per skip reason, with every reason
// known present from the start (at 0).
func skippedByReason(s actors.TopicStatsSnapshot, known []messages.Reason) map[string]int64 {
	return byReason(s.SkippedByReason, known)
}

// deadLetteredByReason is the snapshot's count per dead-letter reason, every
// one of messages.DeadLetterReasons and of the validation reasons known
// present from the start (at 0).
func deadLetteredByReason(s actors.TopicStatsSnapshot, validation []messages.Reason) map[string]int64 {
	return byReason(s.DeadLetteredByReason, append(messages.DeadLetterReasons(), validation...))
}

// byReason is counts keyed by each reason Clean, known ones present at 0.
// The pipeline counts reasons clean already (messages.SkipReasonOf and
// ValidationReasonOf clean them); cleaning again here keeps a label value
// the Prometheus client refuses out of every scrape whatever a counter was
// given, and two reasons that clean alike are summed, as one label value
// must be.
func byReason(counts map[string]int64, known []messages.Reason) map[string]int64 {
	out := make(map[string]int64, len(counts)+len(known))
	for _, r := range known {
		out[string(r.Clean())] = 0
	}
	for r, n := range counts {
		out[string(messages.Reason(r).Clean())] += n
	}
	return out
}

var (
	partitionLabels = []string{"topic", "partition"}
	descCommitted   = prometheus.NewDesc("patchflow_partition_committed_offset", "The group's committed offset (the next to consume): the last marked, or before the claim's first mark the one committed when it began; absent while the group has none.", partitionLabels, nil)
	descAdmitted    = prometheus.NewDesc("patchflow_partition_admitted_offset", "Highest offset admitted to the pipeline; absent before the claim's first.", partitionLabels, nil)
	descInFlight    = prometheus.NewDesc("patchflow_partition_in_flight_records", "Records admitted and not finished.", partitionLabels, nil)
	descPinnedAge   = prometheus.NewDesc("patchflow_partition_oldest_in_flight_age_seconds", "How long the oldest unfinished record has held the watermark.", partitionLabels, nil)
	descPinned      = prometheus.NewDesc("patchflow_partition_pinned_offset", "Offset of the oldest unfinished record (the one holding the watermark).", partitionLabels, nil)
	descLag         = prometheus.NewDesc("patchflow_partition_lag_records", "High watermark minus committed offset.", partitionLabels, nil)
	descRecords     = prometheus.NewDesc("patchflow_records_total", "Records by outcome: ok, skipped (ignored by design, committed), dead_lettered, resumed (finished by the partition's earlier owner, as its commit metadata said: not run again), abandoned (left at a drain, redelivered), fenced (late completion dropped).", []string{"topic", "outcome"}, nil)
	descSpanBlocked = prometheus.NewDesc("patchflow_partition_span_blocked", "1 while the partition admits nothing because its next record is a span (SpanPerPartition) past the oldest unfinished one, which patchflow_partition_pinned_offset names.", partitionLabels, nil)
	descUnconfirmed = prometheus.NewDesc("patchflow_partition_unconfirmed", "1 while the partition admits nothing because the group's coordinator has not confirmed this member for a session timeout (cut off from the coordinator, the member may have been thrown out of the group and its partitions given to others).", partitionLabels, nil)
	descMetaBytes   = prometheus.NewDesc("patchflow_partition_commit_metadata_bytes", "Size of the commit metadata last marked: the offsets finished above the committed one, which a new owner does not run again.", partitionLabels, nil)
	descSkipped     = prometheus.NewDesc("patchflow_records_skipped_total", "Records the handler skipped on purpose (it returned Skip), by reason: committed, never dead-lettered.", []string{"topic", "reason"}, nil)
	descDeadLetters = prometheus.NewDesc("patchflow_records_dead_lettered_total", "Records dead-lettered (the envelope acknowledged), by reason: a broken message's validation reason, or the class of the failure that decided (permanent, transient, unknown, panic). Sums to patchflow_records_total{outcome=\"dead_lettered\"}.", []string{"topic", "reason"}, nil)
	descRetries     = prometheus.NewDesc("patchflow_retries_total", "Failed attempts judged by the retry rule, by verdict: the record's own (counts towards its dead letter), shared with other records (an outage, load shedding, a wait for a pool connection), or held (nothing could judge it).", []string{"topic", "counted"}, nil)
	descHeld        = prometheus.NewDesc("patchflow_records_held", "Records whose latest failure nothing could judge (no other record called the dependency, no health check of it ran, just after it): retried, never dead-lettered on a guess, until evidence comes or an operator releases them (docs/consumer.md, \"Held records\").", nil, nil)
	descOverdue     = prometheus.NewDesc("patchflow_attempts_overdue", "Handler attempts still running past their deadline (AttemptTimeout) and a grace: a handler that does not honour its context.", nil, nil)
	descLent        = prometheus.NewDesc("patchflow_evidence_lent_total", "Offsets admitted past a partition's span as evidence for the record pinning it (other records' calls tell whether its dependency serves).", nil, nil)
	descReleased    = prometheus.NewDesc("patchflow_records_released_total", "Records an operator released to the dead-letter topic.", []string{"topic"}, nil)
	descDLQFailures = prometheus.NewDesc("patchflow_dead_letter_write_failures_total", "Dead-letter writes that failed and are being retried (the record stays unfinished).", []string{"topic"}, nil)
	descDLQBlocked  = prometheus.NewDesc("patchflow_partition_dead_letter_blocked", "1 while a dead-letter write of the partition keeps failing (its record stays unfinished until a write succeeds).", partitionLabels, nil)
	descFaults      = prometheus.NewDesc("patchflow_accounting_faults_total", "Accounting faults that are bugs, always 0: a credit given back twice (credit), a finish the ledger refused (finish).", []string{"kind"}, nil)
	descPanics      = prometheus.NewDesc("patchflow_handler_panics_total", "Handler panics caught by supervision.", []string{"topic"}, nil)
	descProcessIn   = prometheus.NewDesc("patchflow_in_flight_records", "Records admitted and not finished in the whole process.", nil, nil)
	descLimit       = prometheus.NewDesc("patchflow_concurrency_limit", "The process-wide in-flight limit now: InFlightTotal with fixed concurrency, the adaptive limit (between its floor and InFlightTotal) otherwise.", []string{"mode"}, nil)
	descBaseline    = prometheus.NewDesc("patchflow_concurrency_baseline_seconds", "The adaptive limit's no-load handler latency estimate (0 when fixed).", nil, nil)
	descWindowLat   = prometheus.NewDesc("patchflow_concurrency_latency_seconds", "The adaptive limit's last window of handler latency, mean (0 when fixed).", nil, nil)
	descFloor       = prometheus.NewDesc("patchflow_concurrency_floor", "The lowest the process-wide in-flight limit goes (ConcurrencyFloor; the limit itself when fixed).", nil, nil)
	descCeiling     = prometheus.NewDesc("patchflow_concurrency_ceiling", "The highest the process-wide in-flight limit goes (InFlightTotal).", nil, nil)
	descQueue       = prometheus.NewDesc("patchflow_concurrency_queue_records", "Records the adaptive limit estimates are queueing downstream: limit × (1 − baseline/latency) (0 when fixed).", nil, nil)
)

// bridgeCollector reads the bridge at scrape time.
type bridgeCollector struct {
	skipReasons, validationReasons []messages.Reason
	partitions                     func() []actors.PartitionState
	stats                          func() actors.StatsSnapshot
	concurrency                    func() actors.ConcurrencyState
}

func (c *bridgeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCommitted, descAdmitted, descInFlight, descPinnedAge, descPinned, descLag, descRecords, descSkipped, descDeadLetters, descRetries, descPanics, descProcessIn,
		descDLQFailures, descDLQBlocked, descFaults, descSpanBlocked, descUnconfirmed, descMetaBytes, descLimit, descFloor, descCeiling, descBaseline, descWindowLat, descQueue,
		descHeld, descOverdue, descLent, descReleased} {
		ch <- d
	}
}

// collectTopic sends the counters of one topic's records.
func (c *bridgeCollector) collectTopic(ch chan<- prometheus.Metric, topic string, t actors.TopicStatsSnapshot) {
	for outcome, v := range map[string]int64{"ok": t.Succeeded, "skipped": t.Skipped, "dead_lettered": t.DeadLettered, "resumed": t.Resumed, "abandoned": t.Abandoned, "fenced": t.Fenced} {
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(v), topic, outcome)
	}
	for reason, v := range skippedByReason(t, c.skipReasons) {
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.CounterValue, float64(v), topic, reason)
	}
	for reason, v := range deadLetteredByReason(t, c.validationReasons) {
		ch <- prometheus.MustNewConstMetric(descDeadLetters, prometheus.CounterValue, float64(v), topic, reason)
	}
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(t.RetriedOwn), topic, "own")
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(t.RetriedShared), topic, "shared")
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(t.RetriedHeld), topic, "held")
	ch <- prometheus.MustNewConstMetric(descReleased, prometheus.CounterValue, float64(t.Released), topic)
	ch <- prometheus.MustNewConstMetric(descDLQFailures, prometheus.CounterValue, float64(t.DeadLetterWriteFailures), topic)
	ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(t.Panics), topic)
}

func (c *bridgeCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	var held, overdue int
	for _, p := range c.partitions() {
		held += p.Held
		overdue += p.Overdue
		labels := []string{p.Topic, strconv.Itoa(int(p.Partition))}
		// No sample rather than a made-up offset: -1 is "none" in the state.
		if p.Committed >= 0 {
			ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(p.Committed), labels...)
		}
		if p.Admitted >= 0 {
			ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.GaugeValue, float64(p.Admitted), labels...)
		}
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(p.InFlight), labels...)
		ch <- prometheus.MustNewConstMetric(descPinnedAge, prometheus.GaugeValue, p.PinnedFor(now).Seconds(), labels...)
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(p.Lag()), labels...)
		if p.InFlight > 0 {
			ch <- prometheus.MustNewConstMetric(descPinned, prometheus.GaugeValue, float64(p.PinnedOffset), labels...)
		}
		blocked := 0.0
		if p.DeadLetterBlocked != nil {
			blocked = 1
		}
		ch <- prometheus.MustNewConstMetric(descDLQBlocked, prometheus.GaugeValue, blocked, labels...)
		spanBlocked := 0.0
		if !p.SpanBlocked.IsZero() {
			spanBlocked = 1
		}
		ch <- prometheus.MustNewConstMetric(descSpanBlocked, prometheus.GaugeValue, spanBlocked, labels...)
		unconfirmed := 0.0
		if !p.Unconfirmed.IsZero() {
			unconfirmed = 1
		}
		ch <- prometheus.MustNewConstMetric(descUnconfirmed, prometheus.GaugeValue, unconfirmed, labels...)
		ch <- prometheus.MustNewConstMetric(descMetaBytes, prometheus.GaugeValue, float64(p.MetadataBytes), labels...)
	}
	s := c.stats()
	for topic, t := range s.ByTopic {
		c.collectTopic(ch, topic, t)
	}
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(descOverdue, prometheus.GaugeValue, float64(overdue))
	ch <- prometheus.MustNewConstMetric(descLent, prometheus.CounterValue, float64(s.EvidenceLent))
	ch <- prometheus.MustNewConstMetric(descFaults, prometheus.CounterValue, float64(s.CreditErrors), "credit")
	ch <- prometheus.MustNewConstMetric(descFaults, prometheus.CounterValue, float64(s.RefusedFinishes), "finish")
	ch <- prometheus.MustNewConstMetric(descProcessIn, prometheus.GaugeValue, float64(s.InFlight))
	if c.concurrency != nil {
		cs := c.concurrency()
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(cs.Limit), cs.Mode)
		ch <- prometheus.MustNewConstMetric(descFloor, prometheus.GaugeValue, float64(cs.Floor))
		ch <- prometheus.MustNewConstMetric(descCeiling, prometheus.GaugeValue, float64(cs.Ceiling))
		ch <- prometheus.MustNewConstMetric(descBaseline, prometheus.GaugeValue, cs.Baseline.Seconds())
		ch <- prometheus.MustNewConstMetric(descWindowLat, prometheus.GaugeValue, cs.Latency.Seconds())
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, cs.Queue)
	}
}
