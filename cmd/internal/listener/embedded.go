package listener

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// StartEmbedded starts an in-process Kafka broker (kfake, speaking the real
// protocol on 127.0.0.1) with topic and dlqTopic created. It keeps every
// record in memory: for demos and tests, not production.
func StartEmbedded(topic, dlqTopic string, partitions int) (*kfake.Cluster, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), topic),
		kfake.SeedTopics(int32(partitions), dlqTopic),
	)
	if err != nil {
		return nil, fmt.Errorf("start embedded broker: %w", err)
	}
	return c, nil
}
