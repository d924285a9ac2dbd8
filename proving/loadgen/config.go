package loadgen

import (
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/internal/kafkaflags"
	"github.com/patchflow/patchflow/internal/settings"
)

// Config is the load generator's configuration.
type Config struct {
	Options  Options
	Produce  ProduceOptions
	Expected string // path of the expected-state file; empty: none
	// CreateTopic creates the topic with Partitions partitions when it is
	// missing; without it a missing topic stops loadgen before it sends.
	CreateTopic bool
	Partitions  int
}

// Parse reads the configuration from lookup (the environment) and args.
func Parse(args []string, lookup func(string) (string, bool)) (*Config, *settings.Set, error) {
	c := &Config{Options: DefaultOptions()}
	o := &c.Options
	var brokers, version string
	var seed int
	s := settings.New("loadgen")
	kafkaflags.BrokersSetting(s, &brokers, "comma-separated `host:port` list of Kafka brokers")
	s.String(&c.Produce.Topic, "KAFKA_TOPIC", "kafka-topic", kafkaflags.DefaultTopic, "topic to produce to", nil)
	s.String(&version, "KAFKA_VERSION", "kafka-version", "3.6.0", "Kafka protocol version", func(v string) error {
		_, err := sarama.ParseKafkaVersion(v)
		return err
	})
	s.Int(&seed, "LOADGEN_SEED", "seed", 1, 0, "seed of the dataset and the stream (the platform mock's `MOCK_SEED` must be the same)")
	s.Int(&o.Hosts, "LOADGEN_HOSTS", "hosts", o.Hosts, 1, "hosts")
	s.Int(&o.Events, "LOADGEN_EVENTS", "events", o.Events, 1, "good events (created first for each host, then updates and deletes)")
	s.Int(&o.Orgs, "LOADGEN_ORGS", "orgs", o.Orgs, 1, "organizations")
	s.Int(&o.Shape.Packages, "LOADGEN_PACKAGES", "packages", o.Shape.Packages, 1, "installed packages per host (match `MOCK_PROFILE_PACKAGES`)")
	s.Int(&o.Shape.Repos, "LOADGEN_REPOS", "repos", o.Shape.Repos, 2, "yum repositories per host (match `MOCK_PROFILE_REPOS`)")
	s.Float(&o.DeleteShare, "LOADGEN_DELETE_SHARE", "delete-share", o.DeleteShare, 0, 1, "share of later events that delete their host")
	s.Float(&o.RecheckShare, "LOADGEN_RECHECK_SHARE", "recheck-share", o.RecheckShare, 0, 1,
		"share of later events (not deletes) that re-check in with the host's profile unchanged: a new timestamp only")
	s.Float(&o.ChangeShare, "LOADGEN_CHANGE_SHARE", "change-share", o.ChangeShare, 0, 1,
		"share of later events (not deletes) that re-check in with a few packages changed (bumped, added or removed); the rest of them carry the host's next profile revision")
	s.Float(&o.IDOnlyShare, "LOADGEN_ID_ONLY_SHARE", "id-only-share", o.IDOnlyShare, 0, 1, "share of created/updated events carrying only the host id")
	s.Float(&o.BadShare, "LOADGEN_BAD_SHARE", "bad-share", o.BadShare, 0, 1, "broken messages (the listener dead-letters them), as a share of good events, spread over every bad kind")
	s.Float(&o.SkipShare, "LOADGEN_SKIP_SHARE", "skip-share", o.SkipShare, 0, 1,
		"messages the listener skips (reporter not allowed, edge host, no packages), as a share of good events, spread over every skip kind")
	s.Bool(&o.Bulk, "LOADGEN_BULK", "bulk", o.Bulk, "send the whole (about 100 KB) system profile, not only what the listener reads")
	s.Float(&c.Produce.Rate, "LOADGEN_RATE", "rate", 0, 0, 1e9, "messages per second (`0`: as fast as possible)")
	s.String(&c.Produce.Compression, "LOADGEN_COMPRESSION", "compression", "lz4", "`none`, `gzip`, `snappy`, `lz4` or `zstd`", nil)
	s.Bool(&c.CreateTopic, "LOADGEN_CREATE_TOPIC", "create-topic", false, "create the topic when it does not exist (otherwise a missing topic stops loadgen before it sends anything)")
	s.Int(&c.Partitions, "LOADGEN_PARTITIONS", "partitions", DefaultPartitions, 1, "partitions of a topic `-create-topic` creates")
	s.String(&c.Expected, "LOADGEN_EXPECTED", "expected", "", "write the final state every host must end in to this file (JSON lines)", nil)
	if err := s.Parse(args, lookup); err != nil {
		return nil, s, err
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Produce.Brokers = append(c.Produce.Brokers, b)
		}
	}
	if len(c.Produce.Brokers) == 0 {
		return nil, s, s.Invalid("kafka-brokers", errors.New("no brokers given"))
	}
	if o.RecheckShare+o.ChangeShare > 1 {
		return nil, s, s.Invalid("change-share", fmt.Errorf("LOADGEN_RECHECK_SHARE (%v) and LOADGEN_CHANGE_SHARE (%v) add up to more than 1", o.RecheckShare, o.ChangeShare))
	}
	o.Seed = uint64(seed)
	c.Produce.Version, _ = sarama.ParseKafkaVersion(version)
	return c, s, nil
}
