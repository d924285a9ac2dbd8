package listener

import (
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// StartEmbedded starts an in-process Kafka broker (kfake, speaking the real
// protocol on 127.0.0.1) with topic and dlqTopic created, the dead-letter
// topic as RunWith would create it (sized for the source's records). It
// keeps every record in memory: for demos and tests, not production.
func StartEmbedded(topic, dlqTopic string, partitions int) (*kfake.Cluster, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), topic),
	)
	if err != nil {
		return nil, fmt.Errorf("start embedded broker: %w", err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), cfg)
	if err == nil {
		_, err = ensureDeadLetterTopic(admin, topic, dlqTopic, slog.New(slog.DiscardHandler))
		_ = admin.Close()
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("embedded broker: dead-letter topic: %w", err)
	}
	return c, nil
}
