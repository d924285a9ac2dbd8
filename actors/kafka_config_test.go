package actors_test

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

func TestConsumerIsolationLevel(t *testing.T) {
	cases := []struct {
		isolation string
		want      sarama.IsolationLevel
	}{
		{"", sarama.ReadCommitted}, // the default
		{"read_committed", sarama.ReadCommitted},
		{"read_uncommitted", sarama.ReadUncommitted},
	}
	for _, c := range cases {
		cfg, err := actors.NewConsumerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0, Isolation: c.isolation}, actors.DefaultSettings())
		if err != nil {
			t.Fatalf("%q: %v", c.isolation, err)
		}
		if cfg.Consumer.IsolationLevel != c.want {
			t.Errorf("%q: isolation level %v, want %v", c.isolation, cfg.Consumer.IsolationLevel, c.want)
		}
	}
	if _, err := actors.NewConsumerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0, Isolation: "serializable"}, actors.DefaultSettings()); err == nil {
		t.Error("unknown isolation level accepted")
	}
}

// read_committed needs fetch requests that carry the isolation level: Kafka
// 0.11.0 and later. An older protocol version is refused with an error that
// names both settings, unless the records of aborted transactions are
// accepted with read_uncommitted.
func TestReadCommittedNeedsKafka011(t *testing.T) {
	k := actors.KafkaSettings{Version: sarama.V0_10_2_0, Assignor: "range"}
	_, err := actors.NewConsumerConfig(k, actors.DefaultSettings())
	if err == nil || !strings.Contains(err.Error(), "raise the Kafka version") || !strings.Contains(err.Error(), "read uncommitted") {
		t.Fatalf("read_committed on 0.10.2: error %v, want one naming the version and the isolation level", err)
	}
	k.Isolation = "read_uncommitted"
	if _, err := actors.NewConsumerConfig(k, actors.DefaultSettings()); err != nil {
		t.Fatalf("read_uncommitted on 0.10.2: %v", err)
	}
	k.Version, k.Isolation = sarama.V0_11_0_0, ""
	if _, err := actors.NewConsumerConfig(k, actors.DefaultSettings()); err != nil {
		t.Fatalf("read_committed on 0.11.0: %v", err)
	}
}

// The dead-letter producer's record limit follows the dead-letter topic's
// when known, above or below the default.
func TestProducerLimitFollowsDeadLetterTopic(t *testing.T) {
	for _, c := range []struct{ topic, want int }{
		{0, 8 << 20},
		{1<<20 + 64<<10, 1<<20 + 64<<10},
		{32 << 20, 32 << 20},
		{1 << 30, int(sarama.MaxRequestSize) - 1},
	} {
		cfg, err := actors.NewProducerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0, DeadLetterMaxBytes: c.topic})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Producer.MaxMessageBytes != c.want {
			t.Errorf("topic limit %d: producer limit %d, want %d", c.topic, cfg.Producer.MaxMessageBytes, c.want)
		}
	}
}

// The dead-letter producers compress with zstd, and with gzip on protocol
// versions before 2.1.0, which cannot carry zstd; the producer of large
// envelopes sends one record per request, so that the broker judges each
// envelope alone, and takes any record sarama can send.
func TestDeadLetterProducersCompress(t *testing.T) {
	for _, c := range []struct {
		version sarama.KafkaVersion
		want    sarama.CompressionCodec
	}{
		{sarama.V3_6_0_0, sarama.CompressionZSTD},
		{sarama.V2_1_0_0, sarama.CompressionZSTD},
		{sarama.V2_0_0_0, sarama.CompressionGZIP},
		{sarama.V0_11_0_0, sarama.CompressionGZIP},
	} {
		k := actors.KafkaSettings{Version: c.version, DeadLetterMaxBytes: 1 << 20}
		cfg, err := actors.NewProducerConfig(k)
		if err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		large, err := actors.NewLargeProducerConfig(k)
		if err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		if cfg.Producer.Compression != c.want || large.Producer.Compression != c.want {
			t.Errorf("%s: compression %v and %v, want %v", c.version, cfg.Producer.Compression, large.Producer.Compression, c.want)
		}
		if large.Producer.Flush.MaxMessages != 1 || large.Producer.MaxMessageBytes != int(sarama.MaxRequestSize)-1 {
			t.Errorf("%s: large envelopes' producer sends up to %d records a request, each up to %d bytes; want 1, %d",
				c.version, large.Producer.Flush.MaxMessages, large.Producer.MaxMessageBytes, sarama.MaxRequestSize-1)
		}
		if cfg.Producer.Flush.MaxMessages != 0 {
			t.Errorf("%s: the producer sends up to %d records a request; want it to batch", c.version, cfg.Producer.Flush.MaxMessages)
		}
	}
}

// Marks are committed every 100 ms by default (a crash replays what
// finished since the last commit), or as often as the settings say.
func TestCommitInterval(t *testing.T) {
	for _, c := range []struct{ set, want time.Duration }{
		{0, actors.DefaultCommitInterval},
		{2 * time.Second, 2 * time.Second},
	} {
		cfg, err := actors.NewConsumerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0, CommitInterval: c.set}, actors.DefaultSettings())
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Consumer.Offsets.AutoCommit.Interval; got != c.want || !cfg.Consumer.Offsets.AutoCommit.Enable {
			t.Errorf("commit interval %v set: auto-commit every %v (enabled %v), want %v", c.set, got, cfg.Consumer.Offsets.AutoCommit.Enable, c.want)
		}
	}
	if actors.DefaultCommitInterval != 100*time.Millisecond {
		t.Errorf("default commit interval %v, documented as 100ms", actors.DefaultCommitInterval)
	}
}

// The client id and the rack reach the group's sarama configuration; no
// rack fetches from the leader.
func TestClientIDAndRack(t *testing.T) {
	cfg, err := actors.NewConsumerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0, ClientID: "billing-7", Rack: "eu-1a"}, actors.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientID != "billing-7" || cfg.RackID != "eu-1a" {
		t.Errorf("client id %q, rack %q; want billing-7, eu-1a", cfg.ClientID, cfg.RackID)
	}
	cfg, err = actors.NewConsumerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0}, actors.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientID != "patchflow" || cfg.RackID != "" {
		t.Errorf("defaults: client id %q, rack %q; want patchflow and none", cfg.ClientID, cfg.RackID)
	}
}

// The producers that write often compress with a codec that keeps nothing
// between batches (sarama's pooled zstd encoders keep 16 MiB each for good
// once a batch over 128 KiB passed); the dead-letter producer keeps zstd.
func TestFrequentProducersKeepNoCompressionState(t *testing.T) {
	k := actors.KafkaSettings{Version: sarama.V3_6_0_0}
	outbox, err := actors.NewOutboxProducerConfig(k)
	if err != nil {
		t.Fatal(err)
	}
	results, err := actors.NewResultsProducerConfig(k)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := actors.NewProducerConfig(k)
	if err != nil {
		t.Fatal(err)
	}
	if outbox.Producer.Compression != sarama.CompressionSnappy || results.Producer.Compression != sarama.CompressionSnappy {
		t.Errorf("outbox %v, results %v: want snappy", outbox.Producer.Compression, results.Producer.Compression)
	}
	if dead.Producer.Compression != sarama.CompressionZSTD {
		t.Errorf("dead letters %v: want zstd", dead.Producer.Compression)
	}
	if results.Metadata.AllowAutoTopicCreation || !results.Producer.Idempotent || results.Producer.RequiredAcks != sarama.WaitForAll {
		t.Error("the results producer creates topics, or is not idempotent with acks=all")
	}
}
