package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rcrowley/go-metrics"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/pipeline"
	"github.com/patchflow/patchflow/internal/telemetry"
)

// The health checks behind /readyz (WithHealthCheck): how often each runs,
// and how long one may take before it counts as failed.
const (
	healthCheckInterval = time.Second
	healthCheckTimeout  = 2 * time.Second
)

func init() {
	// sarama's go-metrics meters cost CPU on every fetch and start a
	// goroutine that never ends; the consumer does not read them.
	metrics.UseNilMetrics = true
}

// Consumer consumes one topic with a consumer group through a Handler:
// many records of a partition at once, within the in-flight limits, key
// order kept, and the group's committed offset never past a record that is
// not finished. Create it with New, run it with Run. Partitions, Stats and
// Ready may be called from any goroutine, during Run or after.
//
// Costs, measured on two cores (docs/benchmarks.md, scenario 3 and the
// memory scenarios): a few µs of CPU per record in the pipeline besides the
// handler, and memory bounded by the in-flight limits and the read-ahead
// (about 100 MiB for a backlog of a million 1 KB records on 8 partitions),
// not by the backlog.
type Consumer struct {
	cfg     resolved
	handler Handler
	opts    pipeline.Options
	bridge  atomic.Pointer[actors.Bridge]
	ready   atomic.Pointer[telemetry.Readiness]
	running atomic.Bool
	pauses  actors.Pauses
}

// Pause stops admitting records of topics (none: of every topic) until
// Resume: the records in flight finish and are committed, the next record
// of each partition waits unadmitted, and the read-ahead fills to its bound
// before fetching stops. The consumer stays in its group: nothing is
// rebalanced, and a partition that changes owner meanwhile stays paused
// here only. A paused partition is not counted as stalled by Ready.
// Pause may be called before Run, during it or after; a topic not consumed
// is remembered all the same.
func (c *Consumer) Pause(topics ...string) { c.pauses.Pause(topics...) }

// Resume admits records of topics again (none: of every topic, those
// paused by name included). A topic resumed by name stays paused while
// every topic is.
func (c *Consumer) Resume(topics ...string) { c.pauses.Resume(topics...) }

// New checks cfg and returns a Consumer; nothing is contacted until Run.
// The error names every field that is wrong.
func New(cfg Config, h Handler, opts ...Option) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("consumer.New: the handler is nil")
	}
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: r, handler: h}
	for _, o := range opts {
		if o.apply == nil {
			return nil, errors.New("consumer.New: an option is the zero Option")
		}
		o.apply(&c.opts)
	}
	if t := c.opts.ReleaseToken; t != "" && len(t) < telemetry.MinReleaseTokenLength {
		return nil, fmt.Errorf("consumer.WithRelease: the token must be at least %d characters, got %d", telemetry.MinReleaseTokenLength, len(t))
	}
	for _, hc := range c.opts.Checks {
		if hc.Check == nil || hc.Name == "" || hc.Grace < 0 {
			return nil, fmt.Errorf("consumer.WithHealthCheck(%q, %v, check): needs a name, a grace not negative and a check", hc.Name, hc.Grace)
		}
	}
	if c.opts.Logger == nil {
		c.opts.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Run consumes until ctx is done, then stops taking records, lets those in
// flight finish for up to Config.DrainTimeout, commits, leaves the group and
// returns nil. It first creates the dead-letter topic when it is missing and
// reads the brokers' limits; it returns an error when it cannot start (no
// broker reachable, the topic missing, the dead-letter topic neither there
// nor creatable, the HTTP address taken). A Consumer runs once.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("consumer: Run was called before; a Consumer runs once")
	}
	logger, o := c.opts.Logger, c.opts
	if ctx.Err() != nil {
		return nil // stopped before it began: nothing to drain
	}
	setDecompressionLimit(c.cfg.maxBatchBytes)
	// Reaching the brokers can take minutes when they do not answer; a
	// ctx that ends meanwhile ends Run at once, and what connect opens
	// later is closed when it returns.
	type connected struct {
		l   *links
		err error
	}
	done := make(chan connected, 1)
	go func() {
		l, err := c.connect(logger)
		done <- connected{l, err}
	}()
	var l *links
	select {
	case r := <-done:
		if r.err != nil {
			return r.err
		}
		l = r.l
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				r.l.close()
			}
		}()
		logger.Info("stopped before it had reached the brokers")
		return nil
	}
	defer l.close()
	k, settings, probeClient, groups := l.kafka, l.settings, l.probe, l.groups

	system := actors.NewActorSystem(logger)
	defer system.Shutdown()
	m := o.Metrics
	if m == nil {
		var err error
		if m, err = newMetrics(o.Registerer); err != nil {
			return err
		}
		defer m.Unregister() // the registry may take another consumer once this one is over
	}
	deps := actors.NewDependencies(settings.BlameConfig())
	traces := newTracing(o.TracerProvider, k.Group)
	if r, ok := c.handler.(DependencyReporter); ok {
		r.ReportDependenciesTo(func(ctx context.Context, dependency string, took time.Duration, err error) {
			traces.call(ctx, dependency, took, err)
			m.Dependency(dependency, took, err)
			if ok, counts := served(err); counts {
				deps.Observe(ctx, dependency, took, ok)
			}
		})
	}
	var unreadable *actors.UnreadableConfig
	if c.cfg.maxBatchBytes > 0 {
		unreadable = &actors.UnreadableConfig{Read: actors.NewPartitionReader(probeClient), Window: l.window, Limit: c.cfg.maxBatchBytes}
	}
	handler := c.handler
	if bh, ok := c.handler.(BatchHandler); ok && c.cfg.batchSize > 1 {
		b := newBatcher(bh, traces, c.cfg.batchSize, c.cfg.batchLinger)
		defer b.close() // after the claims drained
		handler = batched{b}
	}
	produced := &results{deps: deps, open: func() (sarama.Client, sarama.SyncProducer, error) {
		cfg, err := actors.NewResultsProducerConfig(k)
		if err != nil {
			return nil, nil, err
		}
		client, err := sarama.NewClient(k.Brokers, cfg)
		if err != nil {
			return nil, nil, err
		}
		producer, err := sarama.NewSyncProducerFromClient(client)
		if err != nil {
			_ = client.Close()
			return nil, nil, err
		}
		return client, producer, nil
	}}
	defer produced.close() // after the members stopped and the claims drained; a send still running closes it later
	var claimMarkers func(context.Context, string, int32) (actors.ClaimMarker, error)
	if c.cfg.transactional {
		produced.txn = &transactions{open: func(id string) (*txnProducer, error) {
			cfg, err := actors.NewTransactionalProducerConfig(k, id)
			if err != nil {
				return nil, err
			}
			client, err := sarama.NewClient(k.Brokers, cfg)
			if err != nil {
				return nil, err
			}
			producer, err := sarama.NewSyncProducerFromClient(client)
			if err != nil {
				_ = client.Close()
				return nil, err
			}
			return &txnProducer{client, producer}, nil
		}, committed: actors.NewCommittedReader(probeClient, k.Group), group: k.Group, prefix: c.cfg.transactionalID,
			interval: k.CommitInterval, deps: deps, logger: logger, claims: map[txnPartition]*claimTxn{}}
		claimMarkers = produced.txn.claimMarker
	}
	var dead actors.DeadLetterWriter = l.dead
	observer, _ := c.handler.(DeadLetterObserver)
	dead = observedDeadLetters(observer, traces, dead)
	bridge, err := actors.NewBridge(actors.BridgeConfig{
		System: system, Settings: settings, Handler: adapt(handler, traces, produced), Observer: m, Dependencies: deps,
		DeadLetters:  dead,
		Logger:       logger,
		SettleProbe:  actors.NewFetchProbe(probeClient, l.isolation),
		Committed:    actors.NewCommittedReader(probeClient, k.Group),
		Membership:   actors.NewMembershipCheck(probeClient, k.Group),
		Pauses:       &c.pauses,
		Lease:        &actors.LeaseConfig{Check: actors.NewLeaseCheck(probeClient, k.Group), SessionTimeout: k.SessionTimeout, Interval: k.HeartbeatInterval},
		Isolation:    l.isolation,
		Unreadable:   unreadable,
		ClaimMarkers: claimMarkers,
	})
	if err != nil {
		return err
	}
	defer bridge.Close()
	bridge.Stats().KnowTopics(k.SourceTopics()...)
	detach, err := m.AttachBridge(bridge)
	if err != nil {
		return err
	}
	defer detach()
	lagWatch := newTopicLagWatch(actors.NewTopicLagReader(l.lag, k.Group, k.SourceTopics()), k.SourceTopics(), actors.MetadataRefresh, logger)
	detachLag, err := m.AttachTopicLag(lagWatch.latest)
	if err != nil {
		return err
	}
	defer detachLag()
	lagCtx, stopLag := context.WithCancel(ctx)
	var lagDone sync.WaitGroup
	lagDone.Go(func() { lagWatch.run(lagCtx) })
	defer lagDone.Wait()
	defer stopLag()
	readiness := &telemetry.Readiness{Bridge: bridge, PinLimit: c.cfg.readyPinLimit, Stalls: &telemetry.StallWatch{}, Logger: logger}
	detachReady, err := m.AttachReadiness(readiness)
	if err != nil {
		return err
	}
	defer detachReady()
	for _, hc := range o.Checks {
		w := telemetry.NewDependencyWatch(hc.Name, hc.Check, hc.Grace, healthCheckTimeout)
		w.OnCheck(func(start time.Time, err error) { deps.Probe(hc.Name, start, err == nil) })
		readiness.Dependencies = append(readiness.Dependencies, w)
	}
	c.bridge.Store(bridge)
	c.ready.Store(readiness)
	stopWatching := watchReadiness(readiness)
	defer stopWatching()
	if o.HTTPAddr != "" {
		rows := o.Settings
		if rows == nil {
			rows = c.cfg.rows()
		}
		var h http.Handler = telemetry.Handler(m, readiness, rows)
		if o.Pprof {
			h = telemetry.WithPprof(h)
		}
		if o.ReleaseToken != "" {
			mux := http.NewServeMux()
			mux.Handle("/", h)
			mux.Handle("POST /records/release", telemetry.ReleaseHandler(func() *actors.Bridge { return bridge }, o.ReleaseToken))
			h = mux
		}
		stopHTTP, err := serveHTTP(o.HTTPAddr, h, c.cfg.http, logger)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	if o.Started != nil {
		o.Started(bridge)
	}

	dlqs := make([]string, 0, len(k.SourceTopics()))
	for _, t := range k.SourceTopics() {
		dlqs = append(dlqs, k.DeadLetterTopicOf(t))
	}
	logger.Info("consumer started", "consumers", c.cfg.members, "topics", strings.Join(k.SourceTopics(), ","), "group", k.Group,
		"dlq_topics", strings.Join(dlqs, ",")) // each topic's, in the same order

	// The members stop only once the drain line is written: it counts the
	// partitions about to drain, which the members would otherwise begin to
	// end (and take off the bridge's list) as the line is being built.
	membersCtx, stopMembers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMembers()
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			err := actors.RunMember(membersCtx, g, k.SourceTopics(), bridge, logger.With("consumer", i))
			if err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				logger.Error("consumer stopped", "consumer", i, "error", err)
			}
		})
	}
	membersDone := make(chan struct{})
	go func() { wg.Wait(); close(membersDone) }()
	// The progress watcher ends with the members: at shutdown, or should
	// every member stop on its own.
	watchCtx, stopLogging := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	watchers.Go(func() { logProgress(watchCtx, bridge, c.cfg.progressInterval, logger) })
	select {
	case <-ctx.Done():
		parts := bridge.Partitions()
		var inFlight int
		for _, p := range parts {
			inFlight += p.InFlight
		}
		logger.Info(fmt.Sprintf("draining %d partitions", len(parts)), "partitions", len(parts), "in_flight", inFlight,
			"timeout", settings.DrainTimeout)
		stopMembers()
	case <-membersDone: // the members stopped by themselves: nothing drains
	}
	<-membersDone
	stopLogging()
	watchers.Wait()
	s := bridge.Stats().Snapshot()
	logger.Info("consumer stopped", "succeeded", s.Succeeded, "skipped", s.Skipped, countsGroup("skipped_by_reason", s.SkippedByReason), "resumed", s.Resumed,
		"dead_lettered", s.DeadLettered, countsGroup("dead_lettered_by_reason", s.DeadLetteredByReason), "retried", s.Retried, "abandoned", s.Abandoned, "fenced", s.Fenced, "panics", s.Panics)
	return nil
}

// setDecompressionLimit sets sarama.MaxDecompressedBatchSize, process-wide,
// to n (0: unbounded) unless it holds n already: sarama reads it, without
// synchronisation, for every batch it decompresses, so it is written only
// when it changes (once in a process whose consumers agree).
func setDecompressionLimit(n int) {
	if int(sarama.MaxDecompressedBatchSize) != n {
		sarama.MaxDecompressedBatchSize = int32(n)
	}
}

// ErrNotClaimed is Release's error for a partition no claim of this
// consumer runs now (another member has it, or none yet).
var ErrNotClaimed = errors.New("no claim of the partition runs in this consumer")

// Release gives up on a failing record of a partition this consumer runs:
// it is dead-lettered (reason "released") when it waits for its retry, else
// when its running attempt fails. It is an operator's action, for a record
// held because nothing can judge its failures (patchflow_records_held), or
// one not worth waiting for through an outage; status says what was done.
// released is false, with the reason in status, for a record that has not
// failed, is already being dead-lettered, or is not in flight.
func (c *Consumer) Release(topic string, partition int32, offset int64) (released bool, status string, err error) {
	b := c.bridge.Load()
	if b == nil {
		return false, "", errors.New("consumer: not running")
	}
	res, found, err := b.ReleaseRecord(topic, partition, offset)
	if err != nil {
		return false, "", err
	}
	if !found {
		return false, "", fmt.Errorf("%s/%d: %w", topic, partition, ErrNotClaimed)
	}
	return res.Released, res.Status, nil
}

// newMetrics returns the consumer's metrics in reg, or in a registry of
// their own when reg is nil.
func newMetrics(reg prometheus.Registerer) (*telemetry.Metrics, error) {
	if reg == nil {
		return telemetry.New(), nil
	}
	return telemetry.NewIn(reg)
}

// watchReadiness runs the health checks and re-judges readiness in the
// background until the returned stop is called; stop returns once both
// have finished, so nothing pings a store closed after the run. They run
// until the run returns, not until shutdown begins: /readyz stays truthful
// while the partitions drain.
func watchReadiness(r *telemetry.Readiness) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, d := range r.Dependencies {
		wg.Go(func() { d.Run(ctx, healthCheckInterval) })
	}
	wg.Go(func() { r.Watch(ctx, time.Second) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// serveHTTP serves h on addr within limits until the returned stop is
// called.
func serveHTTP(addr string, h http.Handler, limits telemetry.ServerLimits, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve HTTP on %s: %w", addr, err)
	}
	stop = telemetry.Serve(ln, h, limits, logger)
	logger.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String(), "max_conns", limits.MaxConns)
	return stop, nil
}

// countsGroup renders counts by name (skipped records by reason, say) as
// a group of a log line, names in order: name=n in text, an object in JSON.
func countsGroup(key string, counts map[string]int64) slog.Attr {
	attrs := make([]any, 0, len(counts))
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		attrs = append(attrs, slog.Int64(name, counts[name]))
	}
	return slog.Group(key, attrs...)
}
