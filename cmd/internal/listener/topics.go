package listener

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// ensureDeadLetterTopic checks that the source topic exists and creates the
// dead-letter topic when it is missing, with as many partitions as the
// source. Starting without a writable dead-letter topic would stall every
// partition at its first bad record, so failure here stops the listener.
func ensureDeadLetterTopic(admin sarama.ClusterAdmin, topic, dlq string) error {
	metas, err := admin.DescribeTopics([]string{topic, dlq})
	if err != nil {
		return fmt.Errorf("describe topics: %w", err)
	}
	var source, dead *sarama.TopicMetadata
	for _, m := range metas {
		switch m.Name {
		case topic:
			source = m
		case dlq:
			dead = m
		}
	}
	if source == nil || errors.Is(source.Err, sarama.ErrUnknownTopicOrPartition) || len(source.Partitions) == 0 {
		return fmt.Errorf("topic %q does not exist", topic)
	}
	if dead != nil && dead.Err == sarama.ErrNoError && len(dead.Partitions) > 0 {
		return nil
	}
	replication := int16(min(3, len(source.Partitions[0].Replicas)))
	err = admin.CreateTopic(dlq, &sarama.TopicDetail{NumPartitions: int32(len(source.Partitions)), ReplicationFactor: replication}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("dead-letter topic %q is missing and could not be created: %w", dlq, err)
	}
	return nil
}
