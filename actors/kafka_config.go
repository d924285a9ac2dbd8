package actors

import (
	"fmt"
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
	// SessionTimeout and HeartbeatInterval tune failure detection; zero keeps
	// sarama's defaults (10 s and 3 s). Tests lower them.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	Security          KafkaSecurity
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

// NewConsumerConfig returns the sarama configuration of one group member.
//
// Offsets are committed only as marked by partition actors (auto-commit of
// marks every second, and at the end of each claim); a group without a
// committed offset starts at the oldest record, so nothing on the topic is
// skipped. The rebalance timeout leaves room for a full drain.
func NewConsumerConfig(k KafkaSettings, s Settings) (*sarama.Config, error) {
	strategy, err := balanceStrategy(k.Assignor)
	if err != nil {
		return nil, err
	}
	cfg := sarama.NewConfig()
	cfg.ClientID = k.ClientID
	if cfg.ClientID == "" {
		cfg.ClientID = "patchflow"
	}
	cfg.Version = k.Version
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = time.Second
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	cfg.Consumer.Group.Rebalance.Timeout = max(60*time.Second, s.DrainTimeout+drainGrace+10*time.Second)
	if k.SessionTimeout > 0 {
		cfg.Consumer.Group.Session.Timeout = k.SessionTimeout
	}
	if k.HeartbeatInterval > 0 {
		cfg.Consumer.Group.Heartbeat.Interval = k.HeartbeatInterval
	}
	if err := k.Security.apply(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka consumer configuration: %w", err)
	}
	return cfg, nil
}

// NewProducerConfig returns the sarama configuration of the dead-letter
// producer: every write waits for all in-sync replicas and is idempotent, so
// a dead letter acknowledged is a dead letter kept.
func NewProducerConfig(k KafkaSettings) (*sarama.Config, error) {
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
	cfg.Producer.MaxMessageBytes = 8 << 20
	cfg.Net.MaxOpenRequests = 1
	if err := k.Security.apply(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka producer configuration: %w", err)
	}
	return cfg, nil
}
