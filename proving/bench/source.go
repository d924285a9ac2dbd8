package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Source gives each measured point a topic that holds enough records and a
// consumer group that never consumed it.
type Source interface {
	// Name is how the report names the broker: "kfake" or "kafka".
	Name() string
	// Topic returns the bootstrap addresses, a topic with at least n records
	// over partitions partitions, a fresh group id, how many records the
	// topic holds, and what to call when the point is done.
	Topic(partitions, n int) (brokers []string, topic, group string, records int, done func(), err error)
}

// KFake starts a fresh in-process broker for every point.
type KFake struct{}

// Name implements Source.
func (KFake) Name() string { return "kfake" }

// Topic implements Source.
func (KFake) Topic(partitions, n int) ([]string, string, string, int, func(), error) {
	const topic = "bench"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic))
	if err != nil {
		return nil, "", "", 0, nil, err
	}
	brokers := c.ListenAddrs()
	if err := produce(brokers, topic, 0, n, 0); err != nil {
		c.Close()
		return nil, "", "", 0, nil, err
	}
	return brokers, topic, "bench", n, c.Close, nil
}

// Kafka uses a real broker: one topic per partition count, filled once and
// topped up when a point needs more, read by a new group for every point.
// The broker runs in its own process, so the CPU per record measured here
// is the consumer's alone.
type Kafka struct {
	Brokers []string
	run     string
	groups  atomic.Int64
	filled  map[int]int // partitions -> records in its topic
}

// NewKafka returns a Source on the broker at brokers.
func NewKafka(brokers []string) *Kafka {
	return &Kafka{Brokers: brokers, run: fmt.Sprintf("%d", time.Now().Unix()), filled: map[int]int{}}
}

// Name implements Source.
func (*Kafka) Name() string { return "kafka" }

// Topic implements Source.
func (k *Kafka) Topic(partitions, n int) ([]string, string, string, int, func(), error) {
	topic := fmt.Sprintf("bench-%s-p%d", k.run, partitions)
	have, ok := k.filled[partitions]
	if !ok {
		if err := createTopic(k.Brokers, topic, partitions); err != nil {
			return nil, "", "", 0, nil, err
		}
	}
	if have < n {
		if err := produce(k.Brokers, topic, have, n-have, 0); err != nil {
			return nil, "", "", 0, nil, err
		}
		k.filled[partitions], have = n, n
	}
	group := fmt.Sprintf("bench-%s-%d", k.run, k.groups.Add(1))
	return k.Brokers, topic, group, have, func() {}, nil
}

// createTopic creates topic with partitions on a single broker.
func createTopic(brokers []string, topic string, partitions int) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", strings.Join(brokers, ","), err)
	}
	defer admin.Close()
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: 1}, false)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// produce writes n records keyed host-<first+i>, spread by key over the
// partitions; valueSize 0 writes a small JSON value, otherwise a value of
// that many bytes.
func produce(brokers []string, topic string, first, n, valueSize int) error {
	return produceWithKeys(brokers, topic, first, n, valueSize, 0)
}

// produceWithKeys is produce with keys distinct keys (0: a key per record),
// drawn at random (seeded, so every run writes the same stream), as hosts
// report at random moments: records of one key then come close enough
// together to wait for each other under key ordering. (Keys in turn, i mod
// keys, would put each key's records keys apart, where no two are ever in
// flight at once.)
func produceWithKeys(brokers []string, topic string, first, n, valueSize, keys int) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	cfg.Producer.Flush.Messages = 1000
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Compression = sarama.CompressionNone
	p, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		return err
	}
	var value sarama.Encoder = sarama.StringEncoder(`{"type":"updated"}`)
	if valueSize > 0 {
		value = sarama.ByteEncoder(make([]byte, valueSize))
	}
	stop, fed := make(chan struct{}), make(chan struct{})
	rng := rand.New(rand.NewPCG(uint64(keys), uint64(first)))
	go func() {
		defer close(fed)
		for i := first; i < first+n; i++ {
			key := i
			if keys > 0 {
				key = rng.IntN(keys)
			}
			select {
			case p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%08d", key)), Value: value}:
			case <-stop:
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		select {
		case <-p.Successes():
		case e := <-p.Errors():
			close(stop)
			<-fed
			go func() {
				for range p.Successes() { // Close waits for these to be taken
				}
			}()
			_ = p.Close() // collects the remaining errors itself
			return fmt.Errorf("produce to %s: %w", topic, e.Err)
		}
	}
	<-fed
	return p.Close()
}
