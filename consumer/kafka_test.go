package consumer

// Tests of what the listener asks of the broker: read_committed isolation
// against a transactional producer, and the dead-letter topic's size limit.
// They run on the in-process kfake broker in `make test`; the TestRealBroker
// ones run the same checks on a real Apache Kafka broker when
// PATCHFLOW_KAFKA_BROKERS names one (`make test-kafka` starts one and sets
// it), and skip otherwise.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/offsets"
	"github.com/patchflow/patchflow/proving/platform"
)

// realBroker returns the brokers PATCHFLOW_KAFKA_BROKERS names and the
// protocol version to speak (PATCHFLOW_KAFKA_VERSION, default 3.6.0), or
// skips the test.
func realBroker(t *testing.T) ([]string, string) {
	t.Helper()
	b := os.Getenv("PATCHFLOW_KAFKA_BROKERS")
	if b == "" {
		t.Skip("PATCHFLOW_KAFKA_BROKERS is not set (make test-kafka runs this against a real broker)")
	}
	v := os.Getenv("PATCHFLOW_KAFKA_VERSION")
	if v == "" {
		v = "3.6.0"
	}
	return strings.Split(b, ","), v
}

// kfakeBroker starts an in-process broker with broker-level configs.
func kfakeBroker(t *testing.T, configs map[string]string) []string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if configs != nil {
		opts = append(opts, kfake.BrokerConfigs(configs))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), rand.IntN(1_000_000))
}

func testAdmin(t *testing.T, brokers []string, version string) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mustVersion(t, version)
	cfg.Net.DialTimeout = 3 * time.Second
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

func mustVersion(t *testing.T, v string) sarama.KafkaVersion {
	t.Helper()
	kv, err := sarama.ParseKafkaVersion(v)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// createTopic creates topic with partitions and, when maxBytes > 0, its own
// max.message.bytes.
func createTopic(t *testing.T, admin sarama.ClusterAdmin, topic string, partitions int32, maxBytes int) {
	t.Helper()
	d := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}
	if maxBytes > 0 {
		v := strconv.Itoa(maxBytes)
		d.ConfigEntries = map[string]*string{"max.message.bytes": &v}
	}
	if err := admin.CreateTopic(topic, d, false); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	waitForTopic(t, admin, topic)
}

// waitForTopic waits until every broker answers for topic: a real broker
// acknowledges a creation before its metadata has spread.
func waitForTopic(t *testing.T, admin sarama.ClusterAdmin, topic string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		metas, err := admin.DescribeTopics([]string{topic})
		if err == nil && len(metas) == 1 && metas[0].Err == sarama.ErrNoError && len(metas[0].Partitions) > 0 {
			if _, err = describeConfig(admin, sarama.ConfigResource{Type: sarama.TopicResource, Name: topic}); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not visible 10s after its creation: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tLog sends log lines to the test log while the test runs.
type tLog struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *tLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	w := &tLog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// --- read_committed ----------------------------------------------------

func TestReadCommittedSkipsAbortedTransactions(t *testing.T) {
	checkIsolation(t, kfakeBroker(t, nil), "3.6.0")
}

func TestRealBrokerReadCommittedSkipsAbortedTransactions(t *testing.T) {
	brokers, version := realBroker(t)
	checkIsolation(t, brokers, version)
}

// checkIsolation writes transactions, some aborted and some committed, and
// runs a listener over them with each isolation level: read_committed (the
// default) must handle exactly the committed records, read_uncommitted must
// see the aborted ones too.
func checkIsolation(t *testing.T, brokers []string, version string) {
	topic := uniqueName("txn")
	createTopic(t, testAdmin(t, brokers, version), topic, 1, 0)
	committed, aborted, end := produceTransactions(t, brokers, version, topic)

	for _, level := range []string{"", "read_uncommitted"} {
		seen := handleUntilCommitted(t, brokers, version, topic, level, end)
		for _, v := range committed {
			if !seen[v] {
				t.Errorf("isolation %q: committed record %s never handled", level, v)
			}
		}
		for _, v := range aborted {
			switch {
			case level == "" && seen[v]:
				t.Errorf("read_committed (the default): record %s of an aborted transaction was handled", v)
			case level == "read_uncommitted" && !seen[v]:
				t.Errorf("read_uncommitted: record %s of an aborted transaction was not handled; the test would not notice read_committed being ignored", v)
			}
		}
	}
}

// produceTransactions writes an aborted transaction, a committed one,
// another aborted one and a last committed one, one record per key. It
// returns the values of each kind and the offset after the last record.
func produceTransactions(t *testing.T, brokers []string, version, topic string) (committed, aborted []string, end int64) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mustVersion(t, version)
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = topic + "-producer"
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	txn := func(commit bool, values ...string) {
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			_, offset, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("host-" + v), Value: sarama.StringEncoder(v)})
			if err != nil {
				t.Fatal(err)
			}
			end = max(end, offset+1)
		}
		if commit {
			err, committed = p.CommitTxn(), append(committed, values...)
		} else {
			err, aborted = p.AbortTxn(), append(aborted, values...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	txn(false, "aborted-1", "aborted-2", "aborted-3")
	txn(true, "committed-1", "committed-2", "committed-3")
	txn(false, "aborted-4", "aborted-5")
	txn(true, "committed-4")
	return committed, aborted, end
}

// handleUntilCommitted runs a listener with the given isolation level ("":
// the default) until its group has committed offset end, and returns the
// values its handler saw. Every admitted record finishes (is handled) before
// the committed offset passes it, so a record not seen by then never will be.
func handleUntilCommitted(t *testing.T, brokers []string, version, topic, isolation string, end int64) map[string]bool {
	t.Helper()
	group := uniqueName("isolation")
	cfg := testConfig(brokers, version, topic, group)
	cfg.Isolation = Isolation(isolation)
	var mu sync.Mutex
	seen := map[string]bool{}
	handler := HandlerFunc(func(_ context.Context, r *Record) error {
		mu.Lock()
		seen[string(r.Value)] = true
		mu.Unlock()
		return nil
	})
	run := start(t, cfg, handler, WithLogger(testLogger(t)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := offsets.Read(brokers, topic, group)
		if err == nil && p.Committed[0] >= end {
			break
		}
		if time.Now().After(deadline) {
			_ = run.Stop()
			t.Fatalf("isolation %q: group %s did not commit offset %d within 30s (progress %+v, error %v)", isolation, group, end, p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if isolation == "" {
		// The log ends in a transaction marker that is never delivered: the
		// partition must still read as caught up once it has settled.
		deadline = time.Now().Add(actors.IdleSettle + 10*time.Second)
		for {
			ps := run.Bridge.Partitions()
			if len(ps) == 1 && ps[0].Lag() == 0 && ps[0].HighWatermark > ps[0].Position() {
				break
			}
			if time.Now().After(deadline) {
				_ = run.Stop()
				t.Fatalf("read_committed: the partition never read as caught up: %+v", ps)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return seen
}

// --- the dead-letter topic's size limit ----------------------------------

func TestDeadLetterTopicSizedForSource(t *testing.T) {
	// A broker-wide message.max.bytes of 3 MiB: a source topic without its
	// own limit accepts that much.
	checkDeadLetterTopicSize(t, kfakeBroker(t, map[string]string{"message.max.bytes": strconv.Itoa(3 << 20)}), "3.6.0", 3<<20)
}

func TestRealBrokerDeadLetterTopicSizedForSource(t *testing.T) {
	brokers, version := realBroker(t)
	checkDeadLetterTopicSize(t, brokers, version, defaultMessageMaxBytes) // .ci/kafka keeps Kafka's default
}

// checkDeadLetterTopicSize checks the dead-letter topic the listener
// creates: as many partitions as the source, and twice the source's limit
// plus 64 KiB for the envelope (room for a record the source holds
// compressed tighter than the dead-letter producer compresses it), whether
// the source has its own max.message.bytes or the broker's (brokerLimit)
// applies. An existing
// dead-letter topic with less room gets a warning that says how to raise it.
func checkDeadLetterTopicSize(t *testing.T, brokers []string, version string, brokerLimit int) {
	admin := testAdmin(t, brokers, version)
	cases := []struct {
		name        string
		sourceLimit int // the source topic's own max.message.bytes; 0: none
		want        int
	}{
		{"source with its own limit", 2 << 20, 2*(2<<20) + 64<<10},
		{"source with the broker's limit", 0, 2*brokerLimit + 64<<10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			source := uniqueName("events")
			dlq := source + ".dlq"
			createTopic(t, admin, source, 3, c.sourceLimit)
			var log bytes.Buffer
			got, err := ensureDeadLetterTopic(admin, source, dlq, slog.New(slog.NewTextHandler(&log, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("returned limit %d, want %d", got, c.want)
			}
			waitForTopic(t, admin, dlq)
			if have, err := maxMessageBytes(admin, dlq); err != nil || have != c.want {
				t.Errorf("dead-letter topic's max.message.bytes %d (%v), want %d", have, err, c.want)
			}
			metas, err := admin.DescribeTopics([]string{dlq})
			if err != nil || len(metas) != 1 || len(metas[0].Partitions) != 3 {
				t.Fatalf("dead-letter topic: %v, %v; want 3 partitions", metas, err)
			}
			if strings.Contains(log.String(), "level=WARN") {
				t.Errorf("warning for a topic the listener sized itself:\n%s", log.String())
			}
		})
	}

	t.Run("existing topic too small", func(t *testing.T) {
		source := uniqueName("events")
		createTopic(t, admin, source, 1, 2<<20)
		small, roomy := source+".small-dlq", source+".roomy-dlq"
		createTopic(t, admin, small, 1, 100_000)
		createTopic(t, admin, roomy, 1, 5<<20)
		var log bytes.Buffer
		got, err := ensureDeadLetterTopic(admin, source, small, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if got != 100_000 {
			t.Errorf("returned limit %d, want the topic's 100000", got)
		}
		want := fmt.Sprintf("--entity-name %s --add-config max.message.bytes=%d", small, 2*(2<<20)+64<<10)
		if s := log.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "without their value") || !strings.Contains(s, want) {
			t.Errorf("no warning saying oversized records lose their value and how to raise the limit (%q):\n%s", want, s)
		}
		log.Reset()
		if got, err := ensureDeadLetterTopic(admin, source, roomy, slog.New(slog.NewTextHandler(&log, nil))); err != nil || got != 5<<20 {
			t.Errorf("roomy dead-letter topic: limit %d, %v", got, err)
		}
		if strings.Contains(log.String(), "level=WARN") {
			t.Errorf("warning for a dead-letter topic with room enough:\n%s", log.String())
		}
	})
}

// A dead-letter topic that is missing and may not be created stops the
// listener with an error that says what to do.
func TestDeadLetterTopicNotCreatable(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Err: kerr.TopicAuthorizationFailed, Count: -1})
	admin := testAdmin(t, c.ListenAddrs(), "3.6.0")
	_, err = ensureDeadLetterTopic(admin, "events", "events.dlq", slog.New(slog.DiscardHandler))
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("error %v does not wrap the broker's refusal", err)
	}
	for _, want := range []string{`dead-letter topic "events.dlq" is missing and could not be created`,
		"create it with 2 partitions and max.message.bytes=" + strconv.Itoa(2*defaultMessageMaxBytes+64<<10),
		"grant the consumer's principal CREATE on it", "Config.DeadLetterTopic"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A missing topic stops the consumer with an error that says how to create
// it (the brokers of production clusters do not create topics on first
// use), in the library's words alone.
func TestMissingTopicSaysHowToCreateIt(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := testAdmin(t, c.ListenAddrs(), "3.6.0")
	_, err = ensureDeadLetterTopic(admin, "platform.inventory.events", "platform.inventory.events.dlq", slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("no error for a missing topic")
	}
	for _, want := range []string{`topic "platform.inventory.events" does not exist, and the consumer does not create it`,
		"--create --topic platform.inventory.events"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for _, product := range []string{"loadgen", "make ", "KAFKA_TOPIC", "listener"} {
		if strings.Contains(err.Error(), product) {
			t.Errorf("error %q names the product's %q", err, product)
		}
	}
}

// The producer RunWith builds takes records as large as the dead-letter
// topic does: the dead-letter topic RunWith creates on the in-process
// broker accepts an envelope around a record of the source's
// largest size whole.
func TestEmbeddedDeadLetterTopicTakesLargestRecord(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := testAdmin(t, c.ListenAddrs(), "3.6.0")
	if _, err := ensureDeadLetterTopic(admin, "events", "events.dlq", slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	limit, err := maxMessageBytes(admin, "events.dlq")
	if err != nil {
		t.Fatal(err)
	}
	k := actors.KafkaSettings{Version: sarama.V3_6_0_0, DeadLetterMaxBytes: limit}
	pcfg, err := actors.NewProducerConfig(k)
	if err != nil {
		t.Fatal(err)
	}
	producer, err := sarama.NewSyncProducer(c.ListenAddrs(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	// The largest value a source record can carry: the limit less the
	// record batch's overhead and the key; random, so that compression does
	// not make it small.
	value := randomBytes(defaultMessageMaxBytes - 200)
	letter := &messages.DeadLetter{OriginalTopic: "events", Key: []byte("host-1"), Value: value, ValueSize: int64(len(value)),
		Error: strings.Repeat("e", 4096), ConsumerGroup: "g"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	capture := &capturingProducer{SyncProducer: producer}
	if err := (&actors.KafkaDeadLetters{Producer: capture, Topic: "events.dlq"}).Write(ctx, letter); err != nil {
		t.Fatal(err)
	}
	if capture.sends != 1 {
		t.Fatalf("%d sends: the envelope was written again without its value", capture.sends)
	}
}

type capturingProducer struct {
	sarama.SyncProducer
	sends int
}

func (p *capturingProducer) SendMessage(m *sarama.ProducerMessage) (int32, int64, error) {
	p.sends++
	return p.SyncProducer.SendMessage(m)
}

// --- a record of the source's largest size, dead-lettered by a listener --

func TestListenerDeadLettersLargestRecordWhole(t *testing.T) {
	checkLargestRecordDeadLettered(t, kfakeBroker(t, nil), "3.6.0")
}

func TestRealBrokerListenerDeadLettersLargestRecordWhole(t *testing.T) {
	brokers, version := realBroker(t)
	checkLargestRecordDeadLettered(t, brokers, version)
}

// checkLargestRecordDeadLettered gives a source topic a 10 MiB limit, above
// the dead-letter producer's 8 MiB default, and has a listener dead-letter a
// 9 MiB record of random bytes, which compression does not shrink: the
// dead-letter topic it creates and the producer it builds must both take the
// envelope whole.
func checkLargestRecordDeadLettered(t *testing.T, brokers []string, version string) {
	const sourceLimit = 10 << 20
	admin := testAdmin(t, brokers, version)
	topic := uniqueName("large")
	createTopic(t, admin, topic, 1, sourceLimit)

	pcfg := sarama.NewConfig()
	pcfg.Version = mustVersion(t, version)
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.MaxMessageBytes = sourceLimit
	producer, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	value := randomBytes(9 << 20)
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("host-1"), Value: sarama.ByteEncoder(value)})
	_ = producer.Close()
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(brokers, version, topic, uniqueName("large"))
	// The test reads the envelope (9 MiB, zstd) in this process, whose
	// sarama clients all decode with the consumer's decompression limit.
	cfg.MaxDecompressedBatchBytes = 2 * sourceLimit
	handler := HandlerFunc(func(context.Context, *Record) error {
		return Permanent(errors.New("refused for the test"))
	})
	run := start(t, cfg, handler, WithLogger(testLogger(t)))
	defer func() { _ = run.Stop() }()
	letter := readOneDeadLetter(t, brokers, version, topic+".dlq")
	if letter.GetValueTruncated() || !bytes.Equal(letter.GetValue(), value) {
		t.Fatalf("dead letter of the 9 MiB record: value %d bytes, value_truncated %v; want it whole", len(letter.GetValue()), letter.GetValueTruncated())
	}
}

// --- a record its source topic holds only compressed -----------------------

func TestListenerDeadLettersCompressedRecordWhole(t *testing.T) {
	checkCompressedRecordDeadLettered(t, kfakeBroker(t, nil), "3.6.0")
}

func TestRealBrokerListenerDeadLettersCompressedRecordWhole(t *testing.T) {
	brokers, version := realBroker(t)
	checkCompressedRecordDeadLettered(t, brokers, version)
}

// checkCompressedRecordDeadLettered writes a 4 MiB value of inventory
// events to a source topic whose max.message.bytes is 1 MiB, which holds it
// only because the producer compresses it (lz4, as loadgen does), and has a
// listener dead-letter it: the envelope must carry the whole value. Both
// halves of the sizing are on trial: the dead-letter topic the listener
// creates must take the envelope compressed, and the dead-letter producer
// must not refuse it for its size before compressing.
func checkCompressedRecordDeadLettered(t *testing.T, brokers []string, version string) {
	const sourceLimit = 1 << 20
	admin := testAdmin(t, brokers, version)
	topic := uniqueName("compressed")
	createTopic(t, admin, topic, 1, sourceLimit)
	value := inventoryEvents(t, 4<<20)

	// Uncompressed, the source refuses the record: without this the test
	// would not be about a record held compressed.
	if err := produceValue(t, brokers, version, topic, value, sarama.CompressionNone); !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		t.Fatalf("the source topic took %d bytes uncompressed (error %v); the test needs a record it holds only compressed", len(value), err)
	}
	if err := produceValue(t, brokers, version, topic, value, sarama.CompressionLZ4); err != nil {
		t.Fatalf("the source topic did not take %d bytes lz4-compressed: %v", len(value), err)
	}

	cfg := testConfig(brokers, version, topic, uniqueName("compressed"))
	handler := HandlerFunc(func(context.Context, *Record) error {
		return Permanent(errors.New("refused for the test"))
	})
	run := start(t, cfg, handler, WithLogger(testLogger(t)))
	defer func() { _ = run.Stop() }()
	letter := readOneDeadLetter(t, brokers, version, topic+".dlq")
	if letter.GetValueTruncated() || !bytes.Equal(letter.GetValue(), value) {
		t.Fatalf("dead letter of a %d-byte record held compressed: value %d bytes, value_truncated %v, value_size %d; want it whole",
			len(value), len(letter.GetValue()), letter.GetValueTruncated(), letter.GetValueSize())
	}
}

// inventoryEvents returns at least n bytes of distinct inventory events as
// loadgen renders them by default (about 100 KB each: 400 packages, 150
// repositories), as a JSON array: a large record as compressible as real
// ones, not a run of one byte.
func inventoryEvents(t *testing.T, n int) []byte {
	t.Helper()
	o := loadgen.DefaultOptions()
	ds := platform.NewDataset(o.Seed, platform.DefaultSize())
	out := []byte("[")
	for i := 0; len(out) < n; i++ {
		item := loadgen.Item{Event: platform.EventSpec{Type: "updated", HostID: platform.HostID(o.Seed, i), OrgID: "org-7",
			Revision: 2, Timestamp: o.Start.Add(time.Hour), RequestID: fmt.Sprintf("req-%d", i), Bulk: true}}
		event, err := loadgen.Render(ds, o, item)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, event...)
	}
	return append(out, ']')
}

// randomBytes returns n bytes no codec shrinks, the same on every run.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b) // never fails
	return b
}

// produceValue writes one record with value to partition 0 of topic,
// compressed with codec, and returns the producer's error.
func produceValue(t *testing.T, brokers []string, version, topic string, value []byte, codec sarama.CompressionCodec) error {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mustVersion(t, version)
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = codec
	// Above the value, so that the broker judges the record, not sarama,
	// which counts it before compressing.
	cfg.Producer.MaxMessageBytes = 2 * len(value)
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("host-1"), Value: sarama.ByteEncoder(value)})
	return err
}

// --- an envelope that does not fit even compressed -----------------------

func TestListenerDeadLettersWithoutValueWhatDoesNotFit(t *testing.T) {
	checkTruncatedDeadLetter(t, kfakeBroker(t, nil), "3.6.0")
}

func TestRealBrokerListenerDeadLettersWithoutValueWhatDoesNotFit(t *testing.T) {
	brokers, version := realBroker(t)
	checkTruncatedDeadLetter(t, brokers, version)
}

// checkTruncatedDeadLetter has a listener dead-letter a record of 200,000
// random bytes to an existing dead-letter topic of 100,000 bytes: no codec
// makes the envelope fit, so it must be written without the value
// (value_truncated, value_size kept) and the record must count as finished,
// its offset committed, rather than hold its partition.
func checkTruncatedDeadLetter(t *testing.T, brokers []string, version string) {
	admin := testAdmin(t, brokers, version)
	topic := uniqueName("incompressible")
	dlq := topic + ".small-dlq"
	createTopic(t, admin, topic, 1, 1<<20)
	createTopic(t, admin, dlq, 1, 100_000)
	value := randomBytes(200_000)
	if err := produceValue(t, brokers, version, topic, value, sarama.CompressionNone); err != nil {
		t.Fatal(err)
	}

	group := uniqueName("incompressible")
	cfg := testConfig(brokers, version, topic, group)
	cfg.DeadLetterTopic = dlq
	handler := HandlerFunc(func(context.Context, *Record) error {
		return Permanent(errors.New("refused for the test"))
	})
	run := start(t, cfg, handler, WithLogger(slog.New(slog.DiscardHandler))) // it warns that the topic is small, as it should
	defer func() { _ = run.Stop() }()
	letter := readOneDeadLetter(t, brokers, version, dlq)
	if !letter.GetValueTruncated() || len(letter.GetValue()) != 0 || letter.GetValueSize() != int64(len(value)) {
		t.Fatalf("dead letter of a record too large for the topic even compressed: value %d bytes, value_truncated %v, value_size %d; want 0, true, %d",
			len(letter.GetValue()), letter.GetValueTruncated(), letter.GetValueSize(), len(value))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := offsets.Read(brokers, topic, group)
		if err == nil && p.Committed[0] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record dead-lettered without its value was not committed within 30s (progress %+v, error %v)", p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readOneDeadLetter waits up to 30 s for the first envelope on partition 0
// of topic.
func readOneDeadLetter(t *testing.T, brokers []string, version, topic string) *messages.DeadLetter {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mustVersion(t, version)
	consumer, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		var l messages.DeadLetter
		if err := proto.Unmarshal(m.Value, &l); err != nil {
			t.Fatal(err)
		}
		return &l
	case <-time.After(30 * time.Second):
		t.Fatalf("no dead letter on %s within 30s", topic)
	}
	return nil
}

// --- the commit metadata's size limit -------------------------------------

// On Apache Kafka (offset.metadata.max.bytes 4,096 by default, as .ci/kafka
// keeps it) a configured limit above the brokers' is lowered to theirs, and
// one below it stands: a commit whose metadata passes the brokers' limit is
// refused whole, offset included.
func TestRealBrokerCommitMetadataLimitFollowsTheBrokers(t *testing.T) {
	brokers, version := realBroker(t)
	admin := testAdmin(t, brokers, version)
	logger := slog.New(slog.DiscardHandler)
	if got := commitMetadataLimit(admin, 8000, logger); got != 4096 {
		t.Fatalf("limit %d with 8,000 configured, want the brokers' 4,096", got)
	}
	if got := commitMetadataLimit(admin, 1000, logger); got != 1000 {
		t.Fatalf("limit %d with 1,000 configured, want 1,000", got)
	}
}

// A broker that does not report offset.metadata.max.bytes (kfake) leaves
// the configured limit.
func TestCommitMetadataLimitWithoutTheBrokersValue(t *testing.T) {
	admin := testAdmin(t, kfakeBroker(t, nil), "3.6.0")
	if got := commitMetadataLimit(admin, 4096, slog.New(slog.DiscardHandler)); got != 4096 {
		t.Fatalf("limit %d, want the configured 4,096", got)
	}
}
