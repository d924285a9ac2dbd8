package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/IBM/sarama"
)

// envelopeMargin is the room a dead-letter envelope needs besides the
// record it wraps. A dead-letter envelope wraps the original key, value and
// headers in a protobuf with the original topic, the consumer group,
// timestamps, the last error's text and the failure history, plus five Kafka
// headers and the key again as the record's key (its marker, when over 256
// bytes). The history keeps ten attempts at most, and the pipeline keeps
// each error text at most 4 KiB long: with the last error again, 44 KiB of
// text at most, which 64 KiB holds with the rest, before compression.
const envelopeMargin = 64 << 10

// deadLetterLimit is the max.message.bytes the listener gives a dead-letter
// topic for a source topic whose limit is sourceLimit: twice that, plus
// envelopeMargin.
//
// The source's limit bounds a record as its producer compressed it, and the
// dead-letter producer compresses the envelope again, with zstd at its
// default level (actors.NewProducerConfig). A record that does not compress
// needs the source's limit plus the envelope. One compressed tighter at the
// source than by the dead-letter producer needs more: twice the source's
// limit takes one compressed up to twice as tight. Measured on 4.1 MiB of
// inventory events, the zstd tool's level 19 is 1.7 times as tight as the
// dead-letter producer; lz4, snappy and gzip at any level are looser. An
// envelope that does not fit even so is cut to fit (actors.FitDeadLetter:
// its quotes first, its value last) rather than not written at all.
func deadLetterLimit(sourceLimit int) int {
	return 2*sourceLimit + envelopeMargin
}

// defaultMessageMaxBytes is Kafka's default message.max.bytes (1 MiB plus
// the record batch overhead), assumed when the limits cannot be read.
const defaultMessageMaxBytes = 1048588

// ensureDeadLetterTopic checks that the source topic exists and creates the
// dead-letter topic when it is missing, with as many partitions as the
// source and a max.message.bytes of deadLetterLimit, so that even the
// largest records the source holds are dead-lettered whole (deadLetterLimit
// says how far that goes).
// When the dead-letter topic exists with a smaller limit it logs a warning
// saying how to raise it. It returns the dead-letter topic's
// max.message.bytes, or 0 when it could not be read.
//
// Starting without a writable dead-letter topic would stall every partition
// at its first bad record, so failure to find or create it stops the
// consumer.
func ensureDeadLetterTopic(admin sarama.ClusterAdmin, topic, dlq string, logger *slog.Logger) (int, error) {
	return ensureSharedDeadLetterTopic(admin, []string{topic}, dlq, logger)
}

// ensureSharedDeadLetterTopic is ensureDeadLetterTopic for the source
// topics that share dlq: each must exist, and a dead-letter topic created
// has the most partitions of them and room for the largest record any of
// them takes.
func ensureSharedDeadLetterTopic(admin sarama.ClusterAdmin, topics []string, dlq string, logger *slog.Logger) (int, error) {
	metas, err := admin.DescribeTopics(append(slices.Clone(topics), dlq))
	if err != nil {
		return 0, fmt.Errorf("describe topics: %w", err)
	}
	var dead *sarama.TopicMetadata
	sources := map[string]*sarama.TopicMetadata{}
	for _, m := range metas {
		if m.Name == dlq {
			dead = m
		} else {
			sources[m.Name] = m
		}
	}
	var source *sarama.TopicMetadata // the one with the most partitions
	sourceLimit := 0
	for _, topic := range topics {
		m := sources[topic]
		if m == nil || errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition) || len(m.Partitions) == 0 {
			return 0, fmt.Errorf("topic %q does not exist, and the consumer does not create it: create it "+
				"(kafka-topics.sh --bootstrap-server <broker> --create --topic %s --partitions <n>), or name an existing one",
				topic, topic)
		}
		if source == nil || len(m.Partitions) > len(source.Partitions) {
			source = m
		}
		limit, err := maxMessageBytes(admin, topic)
		if err != nil {
			limit = defaultMessageMaxBytes
			logger.Warn("cannot read max.message.bytes of the source topic; sizing the dead-letter topic for the broker default",
				"topic", topic, "assumed_max_message_bytes", limit, "error", err,
				"fix", "grant the consumer's principal DESCRIBE_CONFIGS on topic "+topic+" and the cluster")
		}
		sourceLimit = max(sourceLimit, limit)
	}
	want := deadLetterLimit(sourceLimit)

	if dead != nil && dead.Err == sarama.ErrNoError && len(dead.Partitions) > 0 {
		return checkDeadLetterLimit(admin, dlq, sourceLimit, want, logger), nil
	}
	replication := int16(min(3, len(source.Partitions[0].Replicas)))
	partitions := int32(len(source.Partitions))
	limit := strconv.Itoa(want)
	// compression.type producer: the envelopes are stored as the producer
	// compressed them, whatever the cluster's default (one of
	// "uncompressed" would store them whole, and a large one would go
	// without its value).
	producer := "producer"
	err = admin.CreateTopic(dlq, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: replication,
		ConfigEntries: map[string]*string{"max.message.bytes": &limit, "compression.type": &producer}}, false)
	switch {
	case errors.Is(err, sarama.ErrTopicAlreadyExists): // another consumer created it meanwhile
		return checkDeadLetterLimit(admin, dlq, sourceLimit, want, logger), nil
	case err != nil:
		return 0, fmt.Errorf("dead-letter topic %q is missing and could not be created: %w; create it with %d partitions and max.message.bytes=%d "+
			"(kafka-topics.sh --bootstrap-server <broker> --create --topic %s --partitions %d --config max.message.bytes=%d), "+
			"or grant the consumer's principal CREATE on it, or name an existing topic (Config.DeadLetterTopic)",
			dlq, err, partitions, want, dlq, partitions, want)
	}
	logger.Info("dead-letter topic created", "topic", dlq, "partitions", partitions, "replication_factor", replication,
		"max_message_bytes", want, "source_max_message_bytes", sourceLimit)
	return want, nil
}

// checkDeadLetterLimit reads an existing dead-letter topic's
// max.message.bytes and warns when it is below want. It returns the limit,
// or 0 when it cannot be read.
func checkDeadLetterLimit(admin sarama.ClusterAdmin, dlq string, sourceLimit, want int, logger *slog.Logger) int {
	have, err := maxMessageBytes(admin, dlq)
	if err != nil {
		logger.Warn("cannot read max.message.bytes of the dead-letter topic; an oversized dead letter will be cut for Kafka's default limit, then smaller ones, until the topic takes it (its value last)",
			"topic", dlq, "error", err, "fix", "grant the consumer's principal DESCRIBE_CONFIGS on topic "+dlq+" and the cluster")
		return 0
	}
	if have < want {
		logger.Warn("the dead-letter topic has less room than the consumer gives one it creates (twice the source topic's limit plus 64 KiB "+
			"for the envelope): large records may be dead-lettered without their value (value_truncated)",
			"topic", dlq, "max_message_bytes", have, "source_max_message_bytes", sourceLimit, "wanted_max_message_bytes", want,
			"fix", fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config max.message.bytes=%d, then restart the consumer", dlq, want))
	}
	return have
}

// maxMessageBytes returns the largest record batch topic accepts: its own
// max.message.bytes when the topic overrides it, else the broker's
// message.max.bytes (Kafka reports the effective value on the topic too, but
// not every broker implementation does).
func maxMessageBytes(admin sarama.ClusterAdmin, topic string) (int, error) {
	entries, err := describeConfig(admin, sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"max.message.bytes"}})
	if err != nil {
		return 0, fmt.Errorf("describe configuration of topic %s: %w", topic, err)
	}
	var entry *sarama.ConfigEntry
	for i := range entries {
		if entries[i].Name == "max.message.bytes" {
			entry = &entries[i]
		}
	}
	// DescribeConfigs v0 reports only whether a value is a default.
	if entry != nil && (entry.Source == sarama.SourceTopic || entry.Source == sarama.SourceUnknown && !entry.Default) {
		return parseBytes("max.message.bytes of topic "+topic, entry.Value)
	}
	n, brokerErr := brokerMessageMaxBytes(admin)
	switch {
	case brokerErr == nil:
		return n, nil
	case entry != nil:
		return parseBytes("max.message.bytes of topic "+topic, entry.Value)
	}
	return 0, brokerErr
}

// brokerMessageMaxBytes reads message.max.bytes from one broker of the
// cluster.
func brokerMessageMaxBytes(admin sarama.ClusterAdmin) (int, error) {
	return brokerBytes(admin, "message.max.bytes")
}

// commitMetadataLimit returns the commit metadata limit to use: the one
// configured, lowered to the brokers' offset.metadata.max.bytes when that is
// smaller (a broker refuses the whole commit, offset included, when the
// metadata passes it). When the brokers' value cannot be read, the
// configured one stands.
func commitMetadataLimit(admin sarama.ClusterAdmin, configured int, logger *slog.Logger) int {
	limit, err := brokerBytes(admin, "offset.metadata.max.bytes")
	switch {
	case err != nil:
		logger.Debug("cannot read the brokers' offset.metadata.max.bytes; keeping the configured commit metadata limit", "limit", configured, "error", err)
	case limit < configured:
		logger.Info("commit metadata limited to the brokers' offset.metadata.max.bytes", "limit", limit, "configured", configured)
		return limit
	}
	return configured
}

// brokerBytes reads a size setting from one broker of the cluster.
func brokerBytes(admin sarama.ClusterAdmin, name string) (int, error) {
	brokers, _, err := admin.DescribeCluster()
	if err != nil {
		return 0, fmt.Errorf("describe cluster: %w", err)
	}
	if len(brokers) == 0 {
		return 0, errors.New("describe cluster: no brokers")
	}
	id := strconv.Itoa(int(brokers[0].ID()))
	entries, err := describeConfig(admin, sarama.ConfigResource{Type: sarama.BrokerResource, Name: id, ConfigNames: []string{name}})
	if err != nil {
		return 0, fmt.Errorf("describe configuration of broker %s: %w", id, err)
	}
	for _, e := range entries {
		if e.Name == name {
			return parseBytes(name+" of broker "+id, e.Value)
		}
	}
	return 0, fmt.Errorf("broker %s did not report %s", id, name)
}

// describeConfig returns the configuration entries of one resource.
func describeConfig(admin sarama.ClusterAdmin, res sarama.ConfigResource) ([]sarama.ConfigEntry, error) {
	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{&res}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	var entries []sarama.ConfigEntry
	for _, r := range results {
		if r.Name != res.Name {
			continue
		}
		if r.ErrorCode != sarama.ErrNoError {
			return nil, &sarama.DescribeConfigError{Err: r.ErrorCode, ErrMsg: r.ErrorMsg}
		}
		entries = append(entries, r.Configs...)
	}
	return entries, nil
}

func parseBytes(what, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s is %q, not a positive number of bytes", what, v)
	}
	return n, nil
}
