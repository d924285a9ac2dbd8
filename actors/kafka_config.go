package actors

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// Assignors names the partition assignment strategies a group can use.
// cooperative-sticky (the default) keeps partitions that stay with a member
// running through a rebalance; the others are eager: every rebalance drains
// every partition.
var Assignors = []string{"cooperative-sticky", "sticky", "range", "roundrobin"}

// KafkaSettings are the Kafka-side settings of a listener.
type KafkaSettings struct {
	Brokers  []string
	Topic    string
	Group    string
	DLQTopic string
	Version  sarama.KafkaVersion
	Assignor string
	ClientID string
	// Rack is the member's rack, for fetching from the nearest replica
	// (KIP-392); empty: every fetch from the leader.
	Rack string
	// CommitInterval is how often the marked offsets (and their metadata)
	// are committed, when any changed; zero means DefaultCommitInterval. A
	// crash replays what finished since the last commit, besides what was
	// in flight: at 10,000 records/s a second between commits is up to
	// 10,000 records handled twice.
	CommitInterval time.Duration
	// SessionTimeout and HeartbeatInterval tune failure detection; zero keeps
	// sarama's defaults (10 s and 3 s). Tests lower them.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// Isolation is how the consumers read transactional topics: "" or
	// "read_committed" (the default) delivers only records of committed
	// transactions, so a record whose transaction was aborted is never
	// handled; "read_uncommitted" delivers every record, aborted or not.
	Isolation string
	// DeadLetterMaxBytes is the dead-letter topic's max.message.bytes when
	// known (read at start; the least of them with several dead-letter
	// topics); the dead-letter producer then builds records and batches up
	// to that size before compression, and sends larger envelopes one at a
	// time (NewLargeProducerConfig). Zero: unknown.
	DeadLetterMaxBytes int
	// Topics, when set, are the topics consumed (Topic is then the first),
	// and DeadLetterTopics each one's dead-letter topic (DLQTopic for a
	// topic it does not name); DeadLetterLimits is each dead-letter
	// topic's max.message.bytes, when known.
	Topics           []string
	DeadLetterTopics map[string]string
	DeadLetterLimits map[string]int
	Security         KafkaSecurity
}

// SourceTopics are the topics consumed: Topics, or Topic alone.
func (k KafkaSettings) SourceTopics() []string {
	if len(k.Topics) > 0 {
		return k.Topics
	}
	return []string{k.Topic}
}

// DeadLetterTopicOf is the dead-letter topic of source's records.
func (k KafkaSettings) DeadLetterTopicOf(source string) string {
	if t, ok := k.DeadLetterTopics[source]; ok {
		return t
	}
	return k.DLQTopic
}

// MetadataRefresh is how often the consumers' clients refresh the
// cluster's metadata (sarama's Metadata.RefreshFrequency, 10 min by
// default). The group's leader compares each subscribed topic's partition
// count with the one it assigned at that pace and rebalances when a topic
// grew, so a partition added to a topic is claimed within about twice this
// (the refresh and the leader's check do not run in step) plus a
// rebalance. Each refresh asks the brokers for the consumed topics'
// metadata only (Metadata.Full off).
const MetadataRefresh = 10 * time.Second

// ConsumerChannelBuffer is how many records sarama's channel of a claim
// holds (Config.ChannelBufferSize, 256 by default). It holds them whatever
// their size, before the byte budget sees them, refilled from the next
// fetch while the read-ahead is full: 256 records of 1 MB were 256 MB per
// claim (TestClaimBuffersAreBoundedInBytes). The read-ahead takes the
// claim's records as they come, so the channel only hands them over: four
// records, and sarama sets a partition aside as soon as the read-ahead is
// full, as the read-ahead means it to. 100,000 small records through a
// handler that costs nothing took as long with 1, 8 or 256.
const ConsumerChannelBuffer = 4

// IsolationLevels names the values of KafkaSettings.Isolation, the default
// first.
var IsolationLevels = []string{"read_committed", "read_uncommitted"}

// isolationLevel maps KafkaSettings.Isolation to sarama's level and checks
// that the protocol version can carry it: the isolation level travels in
// fetch requests from version 4 on, which sarama uses from Kafka 0.11.0.
func isolationLevel(k KafkaSettings) (sarama.IsolationLevel, error) {
	switch k.Isolation {
	case "", "read_committed":
		if !k.Version.IsAtLeast(sarama.V0_11_0_0) {
			return 0, fmt.Errorf("isolation level read_committed needs Kafka protocol version 0.11.0 or later (fetch requests carry the isolation level from then on), but the version is %s: raise the Kafka version, or read uncommitted to read records of aborted transactions too", k.Version)
		}
		return sarama.ReadCommitted, nil
	case "read_uncommitted":
		return sarama.ReadUncommitted, nil
	}
	return 0, fmt.Errorf("unknown isolation level %q (want one of %v)", k.Isolation, IsolationLevels)
}

// balanceStrategy maps an assignor name to sarama's strategy.
func balanceStrategy(name string) (sarama.BalanceStrategy, error) {
	switch name {
	case "cooperative-sticky", "":
		return sarama.NewBalanceStrategyCooperativeSticky(), nil
	case "sticky":
		return sarama.NewBalanceStrategySticky(), nil
	case "range":
		return sarama.NewBalanceStrategyRange(), nil
	case "roundrobin":
		return sarama.NewBalanceStrategyRoundRobin(), nil
	}
	return nil, fmt.Errorf("unknown assignor %q (want one of %v)", name, Assignors)
}

// DefaultCommitInterval is KafkaSettings.CommitInterval's default: a
// commit request per member every 100 ms at most, only when a mark changed.
const DefaultCommitInterval = 100 * time.Millisecond

// NewConsumerConfig returns the sarama configuration of one group member.
//
// Offsets are committed only as marked by partition actors (auto-commit of
// marks every k.CommitInterval, and at the end of each claim); a group without a
// committed offset starts at the oldest record, so nothing on the topic is
// skipped. The rebalance timeout leaves room for a full drain. Transactional
// topics are read with k.Isolation, read_committed unless chosen otherwise.
func NewConsumerConfig(k KafkaSettings, s Settings) (*sarama.Config, error) {
	strategy, err := balanceStrategy(k.Assignor)
	if err != nil {
		return nil, err
	}
	isolation, err := isolationLevel(k)
	if err != nil {
		return nil, err
	}
	cfg := sarama.NewConfig()
	cfg.ClientID = k.ClientID
	if cfg.ClientID == "" {
		cfg.ClientID = "patchflow"
	}
	cfg.RackID = k.Rack
	cfg.Metadata.RefreshFrequency = MetadataRefresh
	cfg.Metadata.Full = false
	cfg.Version = k.Version
	cfg.Consumer.Return.Errors = true
	cfg.ChannelBufferSize = ConsumerChannelBuffer
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.IsolationLevel = isolation
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = DefaultCommitInterval
	if k.CommitInterval > 0 {
		cfg.Consumer.Offsets.AutoCommit.Interval = k.CommitInterval
	}
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	cfg.Consumer.Group.Rebalance.Timeout = max(60*time.Second, s.DrainTimeout+drainGrace+10*time.Second)
	if k.SessionTimeout > 0 {
		cfg.Consumer.Group.Session.Timeout = k.SessionTimeout
	}
	if k.HeartbeatInterval > 0 {
		cfg.Consumer.Group.Heartbeat.Interval = k.HeartbeatInterval
	}
	if err := k.Security.Apply(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka consumer configuration: %w", err)
	}
	return cfg, nil
}

// defaultProducerMaxBytes is the dead-letter producer's record and batch
// limit while the dead-letter topic's own limit is unknown.
const defaultProducerMaxBytes = 8 << 20

// NewResultsProducerConfig returns the sarama configuration of the
// producer of the records handlers produce as results: as the dead-letter
// producer's (idempotent, every write acknowledged by all in-sync
// replicas, one request in flight so retries keep order), compressed
// with StatelessCodec, with records up to 1 MiB (Kafka's default topic
// limit), never creating a topic, and a bounded retry budget.
func NewResultsProducerConfig(k KafkaSettings) (*sarama.Config, error) {
	cfg, err := producerConfig(k, 1<<20, false)
	if err != nil {
		return nil, err
	}
	cfg.ClientID += "-results"
	cfg.Producer.Compression = StatelessCodec
	cfg.Metadata.AllowAutoTopicCreation = false
	// A send outlives its record's drain only this long: 4 tries of at
	// most the producer and network timeouts.
	cfg.Producer.Retry.Max = 3
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 10*time.Second, 10*time.Second, 10*time.Second
	return cfg, cfg.Validate()
}

// NewTransactionalProducerConfig returns the sarama configuration of a
// claim's transactional producer (a transactional commit mode): the
// results producer's, under the transactional id id.
func NewTransactionalProducerConfig(k KafkaSettings, id string) (*sarama.Config, error) {
	cfg, err := NewResultsProducerConfig(k)
	if err != nil {
		return nil, err
	}
	cfg.ClientID = strings.TrimSuffix(cfg.ClientID, "-results") + "-txn"
	cfg.Producer.Transaction.ID = id
	return cfg, cfg.Validate()
}

// StatelessCodec is the compression of the producers that write often
// (the outbox relay's, the results'): snappy keeps nothing between
// batches, where sarama's zstd encoders, pooled for the process's life,
// each keep a 16 MiB history once a batch over 128 KiB passed through it
// (a relay catching up after an outage: the 30-minute nemesis's listener
// held 16 MB more for good, RSS 57 -> 81 MB). The dead-letter producer,
// which writes rarely and large, keeps zstd.
const StatelessCodec = sarama.CompressionSnappy

// NewProducerConfig returns the sarama configuration of the dead-letter
// producer: every write waits for all in-sync replicas and is idempotent, so
// a dead letter acknowledged is a dead letter kept. Its records are
// compressed (deadLetterCodec): a record its source topic holds only
// compressed makes an envelope the dead-letter topic holds only compressed.
//
// Its record limit follows the dead-letter topic's max.message.bytes when
// k.DeadLetterMaxBytes knows it. sarama measures records and batches against
// Producer.MaxMessageBytes before compressing them, the broker after, so
// this limit keeps every batch within the topic's: above it, sarama would
// batch several envelopes into one batch the broker could refuse as a whole
// (each would then be written again without its value for nothing). An
// envelope over the limit uncompressed, which may still fit compressed, is
// refused by sarama before it is sent; KafkaDeadLetters then writes it
// through the producer of NewLargeProducerConfig.
func NewProducerConfig(k KafkaSettings) (*sarama.Config, error) {
	limit := defaultProducerMaxBytes
	if k.DeadLetterMaxBytes > 0 {
		limit = k.DeadLetterMaxBytes
	}
	return producerConfig(k, limit, false)
}

// NewLargeProducerConfig returns the sarama configuration of the producer of
// the dead-letter envelopes larger, uncompressed, than NewProducerConfig's
// limit (KafkaDeadLetters.Large): the same, but one record per request, so
// the broker judges each envelope alone by its compressed size, and a record
// limit as high as sarama allows, since sarama measures it uncompressed.
// Such envelopes are rare, so sending them one at a time costs little.
func NewLargeProducerConfig(k KafkaSettings) (*sarama.Config, error) {
	return producerConfig(k, math.MaxInt, true)
}

func producerConfig(k KafkaSettings, limit int, alone bool) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = k.ClientID
	if cfg.ClientID == "" {
		cfg.ClientID = "patchflow"
	}
	cfg.Version = k.Version
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Compression = deadLetterCodec(k.Version)
	// sarama encodes no request over sarama.MaxRequestSize (100 MiB unless
	// changed) and wants MaxMessageBytes below it.
	cfg.Producer.MaxMessageBytes = min(limit, int(sarama.MaxRequestSize)-1)
	if alone {
		cfg.Producer.Flush.MaxMessages = 1
	}
	cfg.Net.MaxOpenRequests = 1
	if err := k.Security.Apply(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka producer configuration: %w", err)
	}
	return cfg, nil
}

// deadLetterCodec is the dead-letter producers' compression: zstd at its
// default level where the protocol version carries it (2.1.0 and later),
// else gzip. Measured on 4.1 MiB of the inventory events loadgen renders
// (40 of about 100 KB), zstd leaves 329 KB, gzip 546 KB at its best level,
// snappy 777 KB and lz4 799 KB at its best. zstd's higher levels leave less:
// 302 KB at sarama's best, for 7 times the CPU (68 ms against 9), and 192 KB
// at the zstd tool's level 19, which sarama's does not reach. The
// dead-letter topic's room (consumer/topics.go) is what takes a record
// compressed tighter than this at its source. Following the source's codec
// instead is not possible record by record (sarama does not say which codec
// a fetched batch used), and would leave the envelope of an lz4 or snappy
// record larger than zstd does.
func deadLetterCodec(v sarama.KafkaVersion) sarama.CompressionCodec {
	if v.IsAtLeast(sarama.V2_1_0_0) {
		return sarama.CompressionZSTD
	}
	return sarama.CompressionGZIP
}
