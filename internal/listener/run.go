package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/telemetry"
)

// The database check behind /readyz: how often it runs, and how long one
// may take before it counts as failed.
const (
	DatabaseCheckInterval = time.Second
	DatabaseCheckTimeout  = 2 * time.Second
)

func init() {
	// sarama's go-metrics meters cost CPU on every fetch and start a
	// goroutine that never ends; the listener does not read them.
	metrics.UseNilMetrics = true
}

// Hooks are optional parts of a run.
type Hooks struct {
	// Started receives the bridge once it exists.
	Started func(*actors.Bridge)
	// Metrics, when set, is served at cfg.HTTPAddr with /healthz and /readyz.
	Metrics *telemetry.Metrics
	// Ping checks the database for /readyz, in the background every
	// DatabaseCheckInterval; it must return by its context's deadline and
	// its errors must carry no secret (persistence.Store.Ping does both).
	Ping func(context.Context) error
	// Settings is shown on the status page (secrets redacted).
	Settings []telemetry.Setting
}

// Run runs the listener until ctx is done, then drains every partition,
// commits and returns nil. It returns an error when it cannot start (no
// broker reachable, no topic, no dead-letter topic, the HTTP address taken).
func Run(ctx context.Context, cfg *Config, handler actors.Handler, logger *slog.Logger, hooks Hooks) error {
	if cfg.Embedded {
		brokers, stop, err := embedded(cfg.extensions).Embedded(cfg.Kafka.Topic)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Brokers = brokers
		cfg.Kafka.Brokers = cfg.Brokers
		logger.Info("embedded Kafka broker started (in-process, in-memory)", "brokers", strings.Join(cfg.Brokers, ","), "topic", cfg.Kafka.Topic)
	}
	return RunWith(ctx, cfg, handler, logger, hooks)
}

// RunWith is Run on brokers already known (cfg.Brokers), without starting
// an embedded one.
func RunWith(ctx context.Context, cfg *Config, handler actors.Handler, logger *slog.Logger, hooks Hooks) error {
	k := cfg.Kafka
	pcfg, err := actors.NewProducerConfig(k)
	if err != nil {
		return err
	}
	admin, err := sarama.NewClusterAdmin(k.Brokers, pcfg)
	if err != nil {
		return fmt.Errorf("connect to Kafka at %v: %w", k.Brokers, err)
	}
	k.DeadLetterMaxBytes, err = ensureDeadLetterTopic(admin, k.Topic, k.DLQTopic, logger)
	if err == nil && cfg.Pipeline.CommitMetadataMaxBytes > 0 {
		cfg.Pipeline.CommitMetadataMaxBytes = commitMetadataLimit(admin, cfg.Pipeline.CommitMetadataMaxBytes, logger)
	}
	_ = admin.Close()
	if err != nil {
		return err
	}
	// The producer's record limit follows the dead-letter topic's.
	pcfg, err = actors.NewProducerConfig(k)
	if err != nil {
		return err
	}
	producer, err := sarama.NewSyncProducer(k.Brokers, pcfg)
	if err != nil {
		return fmt.Errorf("dead-letter producer: %w", err)
	}
	defer producer.Close()

	system := actors.NewActorSystem(logger)
	defer system.Shutdown()
	// The settle probe asks the broker, with the consumers' isolation level,
	// whether an idle partition has anything left to deliver.
	probeCfg, err := actors.NewConsumerConfig(k, cfg.Pipeline)
	if err != nil {
		return err
	}
	probeCfg.ClientID = "patchflow-probe"
	probeClient, err := sarama.NewClient(k.Brokers, probeCfg)
	if err != nil {
		return fmt.Errorf("connect to Kafka at %v: %w", k.Brokers, err)
	}
	defer probeClient.Close()
	bcfg := actors.BridgeConfig{
		System: system, Settings: cfg.Pipeline, Handler: handler,
		DeadLetters: &actors.KafkaDeadLetters{Producer: producer, Topic: k.DLQTopic},
		Logger:      logger,
		SettleProbe: actors.NewFetchProbe(probeClient, probeCfg.Consumer.IsolationLevel),
		Committed:   actors.NewCommittedReader(probeClient, k.Group),
	}
	if hooks.Metrics != nil {
		bcfg.Observer = hooks.Metrics
	}
	bridge, err := actors.NewBridge(bcfg)
	if err != nil {
		return err
	}
	defer bridge.Close()
	if hooks.Metrics != nil {
		hooks.Metrics.AttachBridge(bridge)
	}
	readiness := &telemetry.Readiness{Bridge: bridge, PinLimit: cfg.ReadyPinLimit, Stalls: &telemetry.StallWatch{}, Logger: logger}
	if hooks.Ping != nil {
		readiness.Database = telemetry.NewDependencyWatch("database", hooks.Ping, cfg.ReadyDBGrace, DatabaseCheckTimeout)
	}
	stopWatching := watchReadiness(readiness)
	defer stopWatching()
	if hooks.Metrics != nil && cfg.HTTPAddr != "" {
		stopHTTP, err := serveHTTP(cfg.HTTPAddr, telemetry.Handler(hooks.Metrics, readiness, hooks.Settings), logger)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	if hooks.Started != nil {
		hooks.Started(bridge)
	}

	var groups []sarama.ConsumerGroup
	for i := 0; i < cfg.Consumers; i++ {
		ccfg, err := actors.NewConsumerConfig(k, cfg.Pipeline)
		if err != nil {
			return err
		}
		ccfg.ClientID = fmt.Sprintf("patchflow-%d", i)
		g, err := sarama.NewConsumerGroup(k.Brokers, k.Group, ccfg)
		if err != nil {
			for _, g := range groups {
				_ = g.Close()
			}
			return fmt.Errorf("join consumer group %q: %w", k.Group, err)
		}
		groups = append(groups, g)
	}
	logger.Info("listener started", "consumers", cfg.Consumers, "topic", k.Topic, "group", k.Group, "dlq_topic", k.DLQTopic)

	// The members stop only once the drain line is written: it counts the
	// partitions about to drain, which the members would otherwise begin to
	// end (and take off the bridge's list) as the line is being built.
	membersCtx, stopMembers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMembers()
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			err := actors.RunMember(membersCtx, g, []string{k.Topic}, bridge, logger.With("consumer", i))
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
	watchers.Go(func() { logProgress(watchCtx, bridge, cfg.ProgressInterval, logger) })
	select {
	case <-ctx.Done():
		parts := bridge.Partitions()
		var inFlight int
		for _, p := range parts {
			inFlight += p.InFlight
		}
		logger.Info(fmt.Sprintf("draining %d partitions", len(parts)), "partitions", len(parts), "in_flight", inFlight,
			"timeout", cfg.Pipeline.DrainTimeout)
		stopMembers()
	case <-membersDone: // the members stopped by themselves: nothing drains
	}
	<-membersDone
	stopLogging()
	watchers.Wait()
	s := bridge.Stats().Snapshot()
	logger.Info("listener stopped", "succeeded", s.Succeeded, "skipped", s.Skipped, countsGroup("skipped_by_reason", s.SkippedByReason), "resumed", s.Resumed,
		"dead_lettered", s.DeadLettered, countsGroup("dead_lettered_by_reason", s.DeadLetteredByReason), "retried", s.Retried, "abandoned", s.Abandoned, "fenced", s.Fenced, "panics", s.Panics)
	return nil
}

// watchReadiness checks the database and re-judges readiness in the
// background until the returned stop is called; stop returns once both
// have finished, so nothing pings a store closed after the run. They run
// until the run returns, not until shutdown begins: /readyz stays truthful
// while the partitions drain.
func watchReadiness(r *telemetry.Readiness) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if r.Database != nil {
		wg.Go(func() { r.Database.Run(ctx, DatabaseCheckInterval) })
	}
	wg.Go(func() { r.Watch(ctx, time.Second) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// serveHTTP serves h on addr until the returned stop is called.
func serveHTTP(addr string, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on LISTENER_HTTP_ADDR %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	logger.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
