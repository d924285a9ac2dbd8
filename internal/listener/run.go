package listener

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/pipeline"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/internal/version"
	"github.com/patchflow/patchflow/messages"
)

// Hooks are optional parts of a run.
type Hooks struct {
	// Started receives the bridge once it exists.
	Started func(*actors.Bridge)
	// Metrics, when set, holds the consumer's metrics (the domain handler
	// reports into it too), served at cfg.HTTPAddr.
	Metrics *telemetry.Metrics
	// Ping checks the database for /readyz, in the background every
	// second; it must return by its context's deadline and its errors must
	// carry no secret (persistence.Store.Ping does both).
	Ping func(context.Context) error
	// PingVMaaS checks VMaaS the same way (clients.VMaaS.Ping). Both
	// checks also judge their dependency's failures for a record that
	// fails alone (consumer.WithHealthCheck).
	PingVMaaS func(context.Context) error
	// Settings is shown on the status page (secrets redacted).
	Settings []telemetry.Setting
}

// Run runs the listener until ctx is done, then drains every partition,
// commits and returns nil. It returns an error when it cannot start (no
// broker reachable, no topic, no dead-letter topic, the HTTP address taken).
func Run(ctx context.Context, cfg *Config, handler consumer.Handler, logger *slog.Logger, hooks Hooks) error {
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
// an embedded one. It runs a consumer.Consumer, as any user of that
// package would, plus the module's own hooks.
func RunWith(ctx context.Context, cfg *Config, handler consumer.Handler, logger *slog.Logger, hooks Hooks) error {
	opts := []consumer.Option{consumer.WithLogger(logger)}
	if cfg.HTTPAddr != "" {
		opts = append(opts, consumer.WithHTTP(cfg.HTTPAddr))
		if cfg.Pprof {
			opts = append(opts, consumer.WithPprof())
		}
		if cfg.ReleaseToken != "" {
			opts = append(opts, consumer.WithRelease(cfg.ReleaseToken))
		}
	}
	if hooks.Ping != nil {
		opts = append(opts, consumer.WithHealthCheck(messages.DependencyDatabase, cfg.ReadyDBGrace, hooks.Ping))
	}
	if hooks.PingVMaaS != nil {
		opts = append(opts, consumer.WithHealthCheck(clients.DependencyVMaaS, cfg.ReadyVMaaSGrace, hooks.PingVMaaS))
	}
	if hooks.Started != nil {
		opts = append(opts, pipeline.As[consumer.Option](pipeline.Started(hooks.Started)))
	}
	if hooks.Metrics != nil {
		opts = append(opts, pipeline.As[consumer.Option](pipeline.Metrics(hooks.Metrics)))
	}
	opts = append(opts, pipeline.As[consumer.Option](pipeline.Settings(append([]telemetry.Setting{}, hooks.Settings...))))
	tp, shutdownTraces, err := tracerProvider(ctx, cfg.TracesExporter, version.Get().Version)
	if err != nil {
		return err
	}
	defer shutdownTraces()
	if tp != nil {
		opts = append(opts, consumer.WithTracerProvider(tp))
	}
	c, err := consumer.New(cfg.ConsumerConfig(), handler, opts...)
	if err != nil {
		return err
	}
	if err := c.Run(ctx); err != nil {
		if strings.Contains(err.Error(), missingTopic) {
			return fmt.Errorf("listener: %w (KAFKA_TOPIC names it; bin/loadgen -create-topic creates it before producing, make kafka-up on its broker)", err)
		}
		return fmt.Errorf("listener: %w", err)
	}
	return nil
}

// missingTopic is how the consumer's error for a topic that does not exist
// reads; the listener adds where its own tools create one.
const missingTopic = "does not exist, and the consumer does not create it"

// ConsumerConfig is the consumer configuration the listener's settings
// describe. The listener's "none" values (0) are the consumer's negative
// ones.
func (cfg *Config) ConsumerConfig() consumer.Config {
	k, p := cfg.Kafka, cfg.Pipeline
	none := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	metadata := p.CommitMetadataMaxBytes
	if metadata == 0 {
		metadata = -1
	}
	return consumer.Config{
		Brokers: k.Brokers, Topic: k.Topic, Group: k.Group, DeadLetterTopic: k.DLQTopic, KafkaVersion: k.Version.String(),
		Assignor: consumer.Assignor(k.Assignor), Isolation: consumer.Isolation(k.Isolation), CommitInterval: k.CommitInterval,
		SessionTimeout: k.SessionTimeout, HeartbeatInterval: k.HeartbeatInterval,
		Security: consumer.Security{TLS: k.Security.TLS, CAFile: k.Security.CAFile, CertFile: k.Security.CertFile, KeyFile: k.Security.KeyFile,
			InsecureSkipVerify: k.Security.InsecureSkipVerify, SASLMechanism: consumer.SASLMechanism(k.Security.SASLMechanism), SASLUser: k.Security.SASLUser,
			SASLPassword: k.Security.SASLPassword},
		Members: cfg.Consumers,
		// The listener's defaults (S 64, floor 8) follow a smaller G, as
		// they did before the consumer held them against it.
		InFlightPerPartition: min(p.InFlightPerPartition, p.InFlightTotal), InFlightTotal: p.InFlightTotal,
		Concurrency: consumer.Concurrency(p.Concurrency.String()), ConcurrencyFloor: min(p.ConcurrencyFloor, p.InFlightTotal), ConcurrencyLaw: consumer.ConcurrencyLaw(p.ConcurrencyLaw.String()),
		ConcurrencyTolerance: p.ConcurrencyTolerance, Ordering: consumer.Ordering(p.Ordering.String()), DrainTimeout: p.DrainTimeout,
		MaxAttempts: p.MaxAttempts, AttemptTimeout: none(p.AttemptTimeout), BackoffMin: p.BackoffMin, BackoffMax: p.BackoffMax,
		SpanPerPartition: p.SpanPerPartition, CommitMetadataMaxBytes: metadata,
		ReadyPinLimit: cfg.ReadyPinLimit, ProgressInterval: none(cfg.ProgressInterval), HTTP: cfg.HTTP,
		MaxDecompressedBatchBytes: cfg.MaxDecompressedBatchBytes,
	}
}
