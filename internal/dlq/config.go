// Package dlq reads the listener's dead-letter topic and prints each record
// as one readable line (or one JSON object): when it was given up, where it
// came from (topic, partition, offset), its key, the reason, the attempts
// and the last error. cmd/dlq is a thin main over it.
//
// It reads with a plain consumer (no group, nothing committed), from each
// partition's oldest record or from a given offset, and stops at the end
// offsets it found at start unless it follows the topic. A record that is
// not a dead-letter envelope gets a line saying so, and reading goes on.
// The original record's value (up to a megabyte or so) is printed only when
// asked for. Whatever a record holds is printed escaped: no control
// character or bidirectional control of it reaches the reader's terminal
// raw, in a line or in JSON (format).
package dlq

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/kafkaflags"
	"github.com/patchflow/patchflow/internal/settings"
)

// Where a partition is read from, besides an offset.
const (
	FromOldest = "oldest"
	FromNewest = "newest"
)

// Config is what to read and how to print it.
type Config struct {
	Brokers  []string
	Topic    string // the dead-letter topic
	Version  sarama.KafkaVersion
	Security actors.KafkaSecurity
	// Partition is the only partition read; -1 reads every one.
	Partition int
	// From is FromOldest, FromNewest, or an offset (Offset) each partition
	// is read from: from its oldest record if that offset is gone, from its
	// end if it is not written yet.
	From   string
	Offset int64
	// Follow keeps reading new records after the end (until interrupted).
	Follow bool
	// JSON prints one JSON object per record instead of a line of text.
	JSON bool
	// Value prints the original record's value too.
	Value bool
}

// Parse reads the configuration from lookup (the environment) and args (the
// flags, which win). It returns settings.ErrHelp for -h, or an error naming
// the bad setting. The Kafka settings are the listener's, names and
// defaults alike, so the listener's environment reaches its dead-letter
// topic.
func Parse(args []string, lookup func(string) (string, bool)) (*Config, *settings.Set, error) {
	var (
		c                            Config
		brokers, topic, dlq, version string
	)
	s := settings.New("dlq")
	kafkaflags.BrokersSetting(s, &brokers, "comma-separated `host:port` list of Kafka brokers, the listener's")
	s.String(&topic, "KAFKA_TOPIC", "kafka-topic", kafkaflags.DefaultTopic, "the listener's topic: the dead-letter topic is named after it", nil)
	s.String(&dlq, "KAFKA_DLQ_TOPIC", "kafka-dlq-topic", "", "dead-letter topic to read (default: KAFKA_TOPIC + '.dlq', as the listener's)", nil)
	s.String(&version, "KAFKA_VERSION", "kafka-version", "3.6.0", "Kafka protocol version to speak", func(v string) error {
		if _, err := sarama.ParseKafkaVersion(v); err != nil {
			return errors.New("not a Kafka version like 3.6.0")
		}
		return nil
	})
	kafkaflags.Security(s, &c.Security)
	s.Int(&c.Partition, "DLQ_PARTITION", "partition", -1, -1, "read only this partition of the dead-letter topic (-1: every one)")
	s.String(&c.From, "DLQ_OFFSET", "offset", FromOldest, "where each partition is read from: oldest, newest (with -follow: only what comes), or an offset of the dead-letter topic (the dlq= of a printed line)", checkFrom)
	s.Bool(&c.Follow, "DLQ_FOLLOW", "follow", false, "keep reading new dead letters after the end, until interrupted")
	s.Bool(&c.JSON, "DLQ_JSON", "json", false, "print one JSON object per record (with the failure history) instead of a line")
	s.Bool(&c.Value, "DLQ_VALUE", "value", false, "print the original record's value too (it may be a megabyte)")
	if err := s.Parse(args, lookup); err != nil {
		return nil, s, err
	}
	if strings.TrimSpace(brokers) == "" {
		return nil, s, s.Invalid("kafka-brokers", errors.New("no brokers given: set a comma-separated host:port list"))
	}
	list, err := kafkaflags.Brokers(brokers)
	if err != nil {
		return nil, s, s.Invalid("kafka-brokers", err)
	}
	c.Brokers = list
	if err := kafkaflags.CheckSecurity(s, c.Security); err != nil {
		return nil, s, err
	}
	c.Topic = dlq
	if c.Topic == "" {
		c.Topic = kafkaflags.DeadLetterTopic(topic)
	}
	if strings.TrimSpace(c.Topic) == "" {
		return nil, s, s.Invalid("kafka-dlq-topic", errors.New("must not be empty"))
	}
	c.Version, _ = sarama.ParseKafkaVersion(version)
	if c.From != FromOldest && c.From != FromNewest {
		c.Offset, _ = strconv.ParseInt(c.From, 10, 64)
	}
	return &c, s, nil
}

func checkFrom(v string) error {
	if v == FromOldest || v == FromNewest {
		return nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
		return fmt.Errorf("not %s, %s or an offset (0 or more)", FromOldest, FromNewest)
	}
	return nil
}
