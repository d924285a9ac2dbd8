package demo

import (
	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(k actors.KafkaSettings, topic string) (map[int32]int64, error) {
	client, err := sarama.NewClient(k.Brokers, sarama.NewConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, p := range parts {
		if out[p], err = client.GetOffset(topic, p, sarama.OffsetNewest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// committedOffsets returns the group's committed offset of every partition.
func committedOffsets(k actors.KafkaSettings) (map[int32]int64, error) {
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	admin, err := sarama.NewClusterAdmin(k.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	res, err := admin.ListConsumerGroupOffsets(k.Group, nil)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, b := range res.Blocks[k.Topic] {
		out[p] = b.Offset
	}
	return out, nil
}

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += max(v, 0)
	}
	return n
}

func equal(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, v := range b {
		if a[p] != v {
			return false
		}
	}
	return true
}
