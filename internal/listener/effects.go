package listener

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/evaluation"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

// EffectsConfig turns on the messages the evaluation publishes through the
// outbox and names their topics.
type EffectsConfig struct {
	Kinds              evaluation.EffectsOptions
	RemediationsTopic  string
	NotificationsTopic string
	PayloadStatusTopic string
	// Interval is the relay's timer; Batch the most messages a round
	// publishes; Linger the least time between two rounds' starts that
	// commits ask for.
	Interval time.Duration
	Batch    int
	Linger   time.Duration
	// DrainTimeout bounds the relay's last rounds at shutdown.
	DrainTimeout time.Duration
}

// Patchman's topic names, the defaults.
const (
	DefaultRemediationsTopic  = "platform.remediation-updates.patch"
	DefaultNotificationsTopic = "platform.notifications.ingress"
	DefaultPayloadStatusTopic = "platform.payload-status"
)

// topics maps each kind turned on to its topic.
func (e EffectsConfig) topics() map[messages.OutboxKind]string {
	t := map[messages.OutboxKind]string{}
	if e.Kinds.Remediations {
		t[messages.OutboxRemediation] = e.RemediationsTopic
	}
	if e.Kinds.Notifications {
		t[messages.OutboxNotification] = e.NotificationsTopic
	}
	if e.Kinds.PayloadStatus {
		t[messages.OutboxPayloadStatus] = e.PayloadStatusTopic
	}
	return t
}

// effectsRelay is the outbox's relay and what it holds open.
type effectsRelay struct {
	system    *actor.ActorSystem
	relay     *actors.Relay
	publisher *actors.KafkaOutboxPublisher
	outbox    *persistence.Outbox
	stopWake  func()
	drain     time.Duration
	logger    *slog.Logger
}

// StartEffects starts the outbox relay publishing to k's brokers; it
// warns of each topic the brokers lack (its messages wait in the outbox
// until it exists). Without a store or with every kind off, it does
// nothing. Close stops it.
func (d *Domain) StartEffects(k actors.KafkaSettings, logger *slog.Logger) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Store == nil || d.relay != nil || d.closed {
		return nil
	}
	topics := d.effects.topics()
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, 0, len(topics))
	for _, kind := range messages.OutboxKinds {
		if t, ok := topics[kind]; ok {
			names = append(names, t)
		}
	}
	if missing, err := actors.MissingTopics(k, names); err != nil {
		logger.Warn("outbox: cannot list the brokers' topics; the relay starts anyway", "error", err)
	} else {
		for _, t := range missing {
			logger.Warn("outbox: topic missing; its messages wait in the outbox until it exists (the platform creates it; consumption goes on)", "topic", t)
		}
	}
	outbox, err := d.Store.OpenOutbox()
	if err != nil {
		return err
	}
	publisher, err := actors.NewKafkaOutboxPublisher(k, topics)
	if err != nil {
		outbox.Close()
		return err
	}
	wake, stopWake := outbox.Listen(func(err error) { logger.Debug("outbox: LISTEN connection", "error", err) })
	var off []messages.OutboxKind
	for _, kind := range messages.OutboxKinds {
		if _, on := topics[kind]; !on {
			off = append(off, kind)
		}
	}
	system := actors.NewActorSystem(logger)
	relay, err := actors.StartRelay(system, actors.RelayConfig{Store: outbox, Publisher: publisher, Wake: wake,
		Interval: d.effects.Interval, Batch: d.effects.Batch, Linger: d.effects.Linger, Exclude: off, RefusedForGood: actors.OutboxRefusedForGood, Logger: logger})
	if err != nil {
		stopWake()
		publisher.Close()
		outbox.Close()
		return fmt.Errorf("outbox relay: %w", err)
	}
	d.relay = &effectsRelay{system: system, relay: relay, publisher: publisher, outbox: outbox, stopWake: stopWake,
		drain: d.effects.DrainTimeout, logger: logger}
	// A commit of this process wakes its relay at once, and the other
	// replicas' through one NOTIFY per 100 ms at most, sent outside the
	// records' transactions.
	d.Store.OnOutboxWrite(func() {
		relay.Wake()
		outbox.NotifySoon()
	})
	logger.Info("outbox relay started", "topics", names)
	return nil
}

// StartEffectsRetrying is StartEffects, tried again every 5 s while it
// fails (brokers out of reach at start) until it succeeds or ctx ends; the
// messages wait in the outbox meanwhile. started, when set, is called once
// it succeeded.
func (d *Domain) StartEffectsRetrying(ctx context.Context, k actors.KafkaSettings, logger *slog.Logger, started func()) {
	for {
		err := d.StartEffects(k, logger)
		if err == nil {
			if started != nil {
				started()
			}
			return
		}
		logger.Error("outbox relay failed to start; messages wait in the outbox, tried again in 5 s", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// Relay is the running outbox relay; nil before StartEffects.
func (d *Domain) Relay() *actors.Relay {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.relay == nil {
		return nil
	}
	return d.relay.relay
}

// close publishes what waits, within the drain timeout, and stops the relay.
func (r *effectsRelay) close(store *persistence.Store) {
	store.OnOutboxWrite(nil)
	drain := r.drain
	if drain <= 0 {
		drain = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := r.relay.Stop(ctx); err != nil {
		r.logger.Warn("outbox relay stopped with messages waiting; they are published at the next start", "error", err)
	}
	r.stopWake()
	r.system.Shutdown()
	_ = r.publisher.Close()
	_ = r.outbox.Close()
}
