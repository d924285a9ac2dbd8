package loadgen

import (
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
)

// DefaultPartitions is how many partitions CheckTopic gives a topic it
// creates, as `make kafka-up` does.
const DefaultPartitions = 8

// ErrNoTopic is returned by CheckTopic when the topic does not exist and it
// was not asked to create it.
var ErrNoTopic = errors.New("topic does not exist")

// CheckTopic makes sure topic exists on the brokers before anything is
// produced: a broker that refuses to create topics on first use (the
// default of production clusters, and of `make kafka-up`'s) would otherwise
// fail every send only after they were all handed over. With create it
// makes a missing topic with partitions partitions, replicated to at most
// three brokers. It reports whether it created the topic.
func CheckTopic(brokers []string, version sarama.KafkaVersion, topic string, create bool, partitions int) (bool, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "patchflow-loadgen"
	cfg.Version = version
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return false, fmt.Errorf("connect to Kafka at %s: %w", strings.Join(brokers, ","), err)
	}
	defer admin.Close()
	metas, err := admin.DescribeTopics([]string{topic})
	if err != nil {
		return false, fmt.Errorf("describe topic %q: %w", topic, err)
	}
	if len(metas) == 1 && metas[0].Err == sarama.ErrNoError && len(metas[0].Partitions) > 0 {
		return false, nil
	}
	if !create {
		return false, fmt.Errorf("%w: %q on %s, and the brokers do not create topics on first use: "+
			"run loadgen with -create-topic (-partitions, default %d), or create it with "+
			"kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions %d "+
			"(make kafka-up creates it on its broker)",
			ErrNoTopic, topic, strings.Join(brokers, ","), DefaultPartitions, brokers[0], topic, DefaultPartitions)
	}
	brokersUp, _, err := admin.DescribeCluster()
	if err != nil {
		return false, fmt.Errorf("describe the cluster: %w", err)
	}
	replication := int16(min(3, max(1, len(brokersUp))))
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: replication}, false)
	switch {
	case errors.Is(err, sarama.ErrTopicAlreadyExists): // created meanwhile by someone else
		return false, nil
	case err != nil:
		return false, fmt.Errorf("create topic %q (%d partitions, replication %d): %w", topic, partitions, replication, err)
	}
	return true, nil
}
