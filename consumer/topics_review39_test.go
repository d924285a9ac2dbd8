package consumer

// Review of 3c4ecda (issue 39): scratch tests that attack the several-topic
// consumer. Each test states the invariant it attacks.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/proving/offsets"
)

// Config.DeadLetterTopic's doc: a shared dead-letter topic is created "with
// ... room for its largest record (the largest source's, when shared)".
// connect creates it for the first topic only; the second, larger, source
// only gets a warning.
func TestReview39SharedDeadLetterTopicHasRoomForTheLargestSource(t *testing.T) {
	brokers := kfakeBroker(t, nil)
	admin := testAdmin(t, brokers, "3.6.0")
	createTopic(t, admin, "small", 1, 100_000)
	createTopic(t, admin, "big", 1, 2<<20)
	cfg := testConfig(brokers, "3.6.0", "", "review39-size")
	cfg.Topics, cfg.DeadLetterTopic = []string{"small", "big"}, "shared"
	c, err := New(cfg, HandlerFunc(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.connect(testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	have, err := maxMessageBytes(admin, "shared")
	if want := deadLetterLimit(2 << 20); err != nil || have < want {
		t.Errorf("shared dead-letter topic created with max.message.bytes %d (%v), want at least %d (room for big's largest record); limits read %v",
			have, err, want, l.kafka.DeadLetterLimits)
	}
}

// The consequence: a record the big source holds whole loses its value in
// the shared dead-letter topic.
func TestReview39SharedDeadLetterKeepsTheBigSourcesRecordWhole(t *testing.T) {
	brokers := kfakeBroker(t, nil)
	admin := testAdmin(t, brokers, "3.6.0")
	createTopic(t, admin, "small", 1, 100_000)
	createTopic(t, admin, "big", 1, 2<<20)
	value := make([]byte, 1<<20)
	r := rand.New(rand.NewChaCha8([32]byte{39}))
	for i := range value {
		value[i] = byte(r.Uint32()) // incompressible
	}
	pcfg := sarama.NewConfig()
	pcfg.Version = sarama.V3_6_0_0
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.MaxMessageBytes = 2 << 20
	p, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "big", Key: sarama.StringEncoder("k"), Value: sarama.ByteEncoder(value)}); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	cfg := testConfig(brokers, "3.6.0", "", "review39-whole")
	cfg.Topics, cfg.DeadLetterTopic = []string{"small", "big"}, "shared"
	run := start(t, cfg, HandlerFunc(func(context.Context, *Record) error { return Permanent(errors.New("refused")) }), WithLogger(testLogger(t)))
	defer func() { _ = run.Stop() }()
	letters := readDeadLetters(t, brokers, "3.6.0", "shared", 1)
	if len(letters) != 1 {
		t.Fatal("no dead letter")
	}
	if l := letters[0]; len(l.GetValue()) != len(value) || l.GetValueCut() != nil {
		t.Errorf("the big source's record of %d bytes (its topic takes 2 MiB) was dead-lettered with %d bytes of value (cut: %v)",
			len(value), len(l.GetValue()), l.GetValueCut())
	}
}

// New refuses a Config that sets only InFlightTotal below the default
// InFlightPerPartition (64): the field named is one the user never set.
// Before 3c4ecda, InFlightTotal: 16 alone ran.
func TestReview39InFlightTotalAloneBelowTheDefaultPerPartition(t *testing.T) {
	cfg := Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Group: "g", InFlightTotal: 16}
	if _, err := New(cfg, HandlerFunc(func(context.Context, *Record) error { return nil })); err != nil {
		t.Errorf("InFlightTotal: 16 alone refused: %v", err)
	}
}

// A batch over the decompression limit in the SECOND topic: its offsets go
// to that topic's dead-letter topic, the first topic's records are handled,
// and both topics are committed to their ends.
func TestReview39UnreadableBatchInTheSecondTopic(t *testing.T) {
	const limit = 1 << 20
	brokers := kfakeBroker(t, nil)
	admin := testAdmin(t, brokers, "3.6.0")
	createTopic(t, admin, "plain", 1, 1<<20)
	createTopic(t, admin, "bombs", 1, 1<<20)
	send := func(topic string, values ...[]byte) []int64 {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_6_0_0
		cfg.Producer.Return.Successes = true
		cfg.Producer.Compression = sarama.CompressionZSTD
		cfg.Producer.MaxMessageBytes = int(sarama.MaxRequestSize) - 1
		cfg.Producer.Flush.Messages = len(values)
		cfg.Producer.Flush.Frequency = 5 * time.Second
		producer, err := sarama.NewSyncProducer(brokers, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		msgs := make([]*sarama.ProducerMessage, len(values))
		for i, v := range values {
			msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.ByteEncoder(v)}
		}
		if err := producer.SendMessages(msgs); err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, m := range msgs {
			out = append(out, m.Offset)
		}
		return out
	}
	send("plain", []byte("p0"))
	send("bombs", []byte("b0"))
	zeros := make([]byte, 2*limit)
	bomb := send("bombs", zeros, zeros)
	send("bombs", []byte("b1"))
	send("plain", []byte("p1"))
	var mu sync.Mutex
	handled := map[string][]string{}
	cfg := testConfig(brokers, "3.6.0", "", "review39-bomb")
	cfg.Topics, cfg.MaxDecompressedBatchBytes = []string{"plain", "bombs"}, limit
	run := start(t, cfg, HandlerFunc(func(_ context.Context, r *Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[r.Topic] = append(handled[r.Topic], string(r.Value))
		return nil
	}), WithLogger(testLogger(t)))
	defer func() { _ = run.Stop() }()
	letters := readDeadLetters(t, brokers, "3.6.0", "bombs.dlq", len(bomb))
	var lettered []int64
	for _, l := range letters {
		lettered = append(lettered, l.GetOriginalOffset())
		if l.GetOriginalTopic() != "bombs" {
			t.Errorf("letter from %q", l.GetOriginalTopic())
		}
	}
	if slices.Sort(lettered); !slices.Equal(lettered, bomb) {
		t.Errorf("dead-lettered %v, want %v", lettered, bomb)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pp, err1 := offsets.Read(brokers, "plain", "review39-bomb")
		pb, err2 := offsets.Read(brokers, "bombs", "review39-bomb")
		if err1 == nil && err2 == nil && pp.Committed[0] == 2 && pb.Committed[0] == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not committed to the ends: plain %+v (%v), bombs %+v (%v)", pp, err1, pb, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(handled); got != "map[bombs:[b0 b1] plain:[p0 p1]]" {
		t.Errorf("handled %s", got)
	}
}

// Release of a held record of the SECOND topic: dead-lettered to that
// topic's dead-letter topic, by Consumer.Release with its topic; the same
// partition and offset of the first topic is another record.
func TestReview39ReleaseOnTheSecondTopic(t *testing.T) {
	brokers := kfakeBroker(t, nil)
	admin := testAdmin(t, brokers, "3.6.0")
	createTopic(t, admin, "one", 1, 1<<20)
	createTopic(t, admin, "two", 1, 1<<20)
	var oneDone atomic.Int64
	h := HandlerFunc(func(_ context.Context, r *Record) error {
		if r.Topic == "two" {
			return FailedIn("svc", errors.New("svc: 503"))
		}
		oneDone.Add(1)
		return nil
	})
	cfg := testConfig(brokers, "3.6.0", "", "review39-release")
	cfg.Topics = []string{"one", "two"}
	cfg.BackoffMin, cfg.BackoffMax, cfg.EvidenceWindow = 5*time.Millisecond, 20*time.Millisecond, 100*time.Millisecond
	pcfg := sarama.NewConfig()
	pcfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"two", "one"} {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(topic)}); err != nil {
			t.Fatal(err)
		}
	}
	_ = p.Close()
	c, err := New(cfg, h, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		held := false
		for _, ps := range c.Partitions() {
			held = held || ps.Topic == "two" && ps.Held == 1
		}
		if held && oneDone.Load() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two/0 not held: %+v", c.Partitions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, status, err := c.Release("one", 0, 0); ok || err != nil || !strings.Contains(status, "not in flight") {
		t.Errorf("release of one/0/0 (handled): %v %q %v", ok, status, err)
	}
	if ok, status, err := c.Release("two", 0, 0); !ok || err != nil {
		t.Fatalf("release of two/0/0: %v %q %v", ok, status, err)
	}
	letters := readDeadLetters(t, brokers, "3.6.0", "two.dlq", 1)
	if len(letters) != 1 || letters[0].GetOriginalTopic() != "two" || letters[0].GetReason() != "released" {
		t.Errorf("two.dlq holds %v", letters)
	}
}

// Kafka refuses a topic whose name differs from an existing one only by
// '.' against '_' (they collide in metric names). Topics [a, a_dlq] passes
// New (it compares names exactly), but a's default dead-letter topic a.dlq
// collides with a_dlq, a topic consumed, and Run cannot start.
func TestReview39DeadLetterTopicCollidingWithAConsumedTopic(t *testing.T) {
	brokers := kfakeBroker(t, nil)
	admin := testAdmin(t, brokers, "3.6.0")
	createTopic(t, admin, "a", 1, 0)
	createTopic(t, admin, "a_dlq", 1, 0)
	cfg := testConfig(brokers, "3.6.0", "", "review39-collide")
	cfg.Topics = []string{"a", "a_dlq"}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Record) error { return nil }))
	if err != nil {
		return // refused by New: what the test wants
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runErr := c.Run(ctx)
	t.Errorf("New accepted Topics [a a_dlq]; Run: %v", runErr)
}
