// Package embedded starts an in-process Kafka broker (kfake, speaking the
// real protocol on 127.0.0.1) for demos, examples and tests. It keeps every
// record in memory: never for production. The product links it only through
// the proving ground's listener build (cmd/listener-proving).
package embedded

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/settings"
)

// DefaultPartitions is the partition count of the topics Start creates
// when given none.
const DefaultPartitions = 8

// Broker is a running in-process broker.
type Broker struct {
	cluster *kfake.Cluster
}

// Start starts a broker on 127.0.0.1 with topics created, each with
// partitions partitions (DefaultPartitions when 0). Topics it does not hold
// are not created on first use, as on most production clusters; a consumer
// creates its own dead-letter topic.
func Start(partitions int, topics ...string) (*Broker, error) {
	if partitions <= 0 {
		partitions = DefaultPartitions
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		return nil, fmt.Errorf("start embedded broker: %w", err)
	}
	return &Broker{cluster: c}, nil
}

// Addrs returns the broker's host:port addresses.
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// Close stops the broker; its records are gone.
func (b *Broker) Close() { b.cluster.Close() }

// Produce writes records to topic, given as key, value pairs, and returns
// once the broker has them all.
func (b *Broker) Produce(topic string, keyValues ...string) error {
	if len(keyValues)%2 != 0 {
		return fmt.Errorf("produce to %s: %d strings are not key, value pairs", topic, len(keyValues))
	}
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(b.Addrs(), cfg)
	if err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, 0, len(keyValues)/2)
	for i := 0; i < len(keyValues); i += 2 {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(keyValues[i]), Value: sarama.StringEncoder(keyValues[i+1])})
	}
	if err := p.SendMessages(msgs); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// Cluster returns the kfake cluster, for tests that steer it.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Extension gives the listener KAFKA_BROKERS=embedded, with its partition
// count as the setting EMBEDDED_PARTITIONS.
func Extension() listener.Extension {
	partitions := DefaultPartitions
	return listener.Extension{
		EmbeddedHelp: "an in-process broker (kfake, in memory: demos and tests only) with `KAFKA_TOPIC` in `EMBEDDED_PARTITIONS` partitions",
		Register: func(s *settings.Set) {
			s.Int(&partitions, "EMBEDDED_PARTITIONS", "embedded-partitions", DefaultPartitions, 1, "partitions of the topic on the embedded broker")
		},
		Embedded: func(topic string) ([]string, func(), error) {
			b, err := Start(partitions, topic)
			if err != nil {
				return nil, nil, err
			}
			return b.Addrs(), b.Close, nil
		},
	}
}
