package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"

	"github.com/patchflow/patchflow/actors"
)

func init() {
	// sarama's go-metrics meters cost CPU on every fetch and start a
	// goroutine that never ends; the listener does not read them.
	metrics.UseNilMetrics = true
}

// Run runs the listener until ctx is done, then drains every partition,
// commits and returns nil. It returns an error when it cannot start (no
// broker reachable, no topic, no dead-letter topic).
func Run(ctx context.Context, cfg *Config, handler actors.Handler, logger *slog.Logger) error {
	if cfg.Embedded {
		cluster, err := StartEmbedded(cfg.Kafka.Topic, cfg.Kafka.DLQTopic, cfg.EmbeddedPartitions)
		if err != nil {
			return err
		}
		defer cluster.Close()
		cfg.Brokers = cluster.ListenAddrs()
		cfg.Kafka.Brokers = cfg.Brokers
		logger.Info("embedded Kafka broker started (in-process, in-memory)", "brokers", cfg.Brokers,
			"topic", cfg.Kafka.Topic, "partitions", cfg.EmbeddedPartitions)
	}
	return RunWith(ctx, cfg, handler, logger, nil)
}

// RunWith is Run with an optional hook that receives the bridge once it
// exists (the demo reads its stats).
func RunWith(ctx context.Context, cfg *Config, handler actors.Handler, logger *slog.Logger, started func(*actors.Bridge)) error {
	k := cfg.Kafka
	pcfg, err := actors.NewProducerConfig(k)
	if err != nil {
		return err
	}
	admin, err := sarama.NewClusterAdmin(k.Brokers, pcfg)
	if err != nil {
		return fmt.Errorf("connect to Kafka at %v: %w", k.Brokers, err)
	}
	err = ensureDeadLetterTopic(admin, k.Topic, k.DLQTopic)
	_ = admin.Close()
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
	bridge, err := actors.NewBridge(actors.BridgeConfig{
		System: system, Settings: cfg.Pipeline, Handler: handler,
		DeadLetters: &actors.KafkaDeadLetters{Producer: producer, Topic: k.DLQTopic},
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	if started != nil {
		started(bridge)
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

	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			err := actors.RunMember(ctx, g, []string{k.Topic}, bridge, logger.With("consumer", i))
			if err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				logger.Error("consumer stopped", "consumer", i, "error", err)
			}
		})
	}
	if cfg.ProgressInterval > 0 {
		wg.Go(func() { logProgress(ctx, bridge.Stats(), cfg.ProgressInterval, logger) })
	}
	wg.Wait()
	s := bridge.Stats().Snapshot()
	logger.Info("listener stopped", "succeeded", s.Succeeded, "dead_lettered", s.DeadLettered, "retried", s.Retried,
		"abandoned", s.Abandoned, "fenced", s.Fenced, "panics", s.Panics)
	return nil
}

func logProgress(ctx context.Context, stats *actors.Stats, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	prev, prevAt := stats.Snapshot(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s := stats.Snapshot()
			done := (s.Succeeded + s.DeadLettered) - (prev.Succeeded + prev.DeadLettered)
			logger.Info("progress", "records_per_second", int64(float64(done)/now.Sub(prevAt).Seconds()),
				"in_flight", s.InFlight, "succeeded", s.Succeeded, "dead_lettered", s.DeadLettered, "retried", s.Retried)
			prev, prevAt = s, now
		}
	}
}
