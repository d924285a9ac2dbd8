package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// newKfake starts an in-process broker holding topic with partitions
// partitions, closed when the test ends, and returns it with the settings
// of a group on it (short session timeouts, so rebalances are quick).
func newKfake(t *testing.T, topic, group string, partitions int32) (*kfake.Cluster, actors.KafkaSettings) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster, actors.KafkaSettings{Brokers: cluster.ListenAddrs(), Topic: topic, Group: group, Version: sarama.V3_6_0_0,
		Assignor: "cooperative-sticky", SessionTimeout: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond}
}

// runMember runs one member of k's group through bridge, as the listener
// does, until stop is called (at the latest when the test ends). configure,
// when not nil, adjusts the member's sarama configuration.
func runMember(t *testing.T, k actors.KafkaSettings, s actors.Settings, bridge *actors.Bridge, configure func(*sarama.Config)) (stop func()) {
	t.Helper()
	cfg, err := actors.NewConsumerConfig(k, s)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	cg, err := sarama.NewConsumerGroup(k.Brokers, k.Group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = actors.RunMember(ctx, cg, []string{k.Topic}, bridge, discardLogger())
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-stopped:
			case <-time.After(30 * time.Second):
				t.Error("member did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// transactionalProducer returns a producer of transactions with id, closed
// when the test ends.
func transactionalProducer(t *testing.T, k actors.KafkaSettings, id string) sarama.SyncProducer {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = id
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// settlingBridge returns a bridge of handler h with the listener's settle
// probe and IdleSettle shortened to settle.
func settlingBridge(t *testing.T, k actors.KafkaSettings, s actors.Settings, h actors.Handler, settle time.Duration) *actors.Bridge {
	t.Helper()
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h, IdleSettle: settle,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		SettleProbe: fetchProbe(t, k)})
	if err != nil {
		t.Fatal(err)
	}
	return bridge
}

// fetchProbe is the listener's settle probe, on a client of its own.
func fetchProbe(t *testing.T, k actors.KafkaSettings) actors.SettleProbe {
	t.Helper()
	cfg, err := actors.NewConsumerConfig(k, testSettings(ordering.Unordered))
	if err != nil {
		t.Fatal(err)
	}
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return actors.NewFetchProbe(client, cfg.Consumer.IsolationLevel)
}
