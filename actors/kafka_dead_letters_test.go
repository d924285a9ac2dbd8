package actors_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"
	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// fakeProducer is a SyncProducer that stores what it accepts and refuses
// records over limit bytes (sarama's ByteSize, as the producer checks it)
// with sarama.ErrMessageSizeTooLarge, as a broker does, and those over own
// bytes with sarama's ConfigurationError, as sarama does those over
// Producer.MaxMessageBytes. fail, when set, answers every send instead.
type fakeProducer struct {
	sarama.SyncProducer // nil: only SendMessage is used
	limit, own          int
	fail                error

	mu       sync.Mutex
	attempts []*messages.DeadLetter // every envelope offered, in order
	stored   []*sarama.ProducerMessage
}

func (p *fakeProducer) SendMessage(msg *sarama.ProducerMessage) (int32, int64, error) {
	body, err := msg.Value.Encode()
	if err != nil {
		return -1, -1, err
	}
	var l messages.DeadLetter
	if err := proto.Unmarshal(body, &l); err != nil {
		return -1, -1, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts = append(p.attempts, &l)
	switch {
	case p.fail != nil:
		return -1, -1, p.fail
	case p.own > 0 && msg.ByteSize(2) > p.own:
		return -1, -1, sarama.ConfigurationError(fmt.Sprintf("Attempt to produce message larger than configured Producer.MaxMessageBytes: %d > %d", msg.ByteSize(2), p.own))
	case p.limit > 0 && msg.ByteSize(2) > p.limit:
		return -1, -1, sarama.ErrMessageSizeTooLarge
	}
	p.stored = append(p.stored, msg)
	return 0, int64(len(p.stored) - 1), nil
}

// fullLetter has every field of the envelope set.
func fullLetter(value []byte) *messages.DeadLetter {
	at := timestamppb.New(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	return &messages.DeadLetter{
		OriginalTopic: "events", OriginalPartition: 3, OriginalOffset: 42,
		Key: []byte("host-1"), Value: value,
		Headers:           []*messages.Header{{Key: []byte("trace"), Value: []byte("abc")}},
		OriginalTimestamp: at, Error: "vmaas: 500", ErrorClass: messages.ErrorClass_ERROR_CLASS_UNKNOWN,
		Attempts: 5, FirstFailureTime: at, LastFailureTime: at, ConsumerGroup: "g",
		History: []*messages.FailedAttempt{{Attempt: 1, ErrorClass: messages.ErrorClass_ERROR_CLASS_UNKNOWN,
			Error: "vmaas: 500", Dependency: "vmaas", Time: at, Own: true}},
		HistoryDropped: 2, OwnFailures: 5, Reason: string(messages.ReasonUnknown),
	}
}

func TestDeadLetterSmallEnvelopeWrittenWhole(t *testing.T) {
	p := &fakeProducer{limit: 4096}
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq"}
	letter := fullLetter([]byte(`{"host":"small"}`))
	letter.ValueSize = int64(len(letter.GetValue()))
	if err := w.Write(context.Background(), letter); err != nil {
		t.Fatal(err)
	}
	if len(p.attempts) != 1 || len(p.stored) != 1 {
		t.Fatalf("%d sends, %d stored; want one of each", len(p.attempts), len(p.stored))
	}
	if got := p.attempts[0]; !proto.Equal(got, letter) {
		t.Fatalf("stored envelope differs from the letter:\n got %v\nwant %v", got, letter)
	}
	msg := p.stored[0]
	if msg.Topic != "events.dlq" {
		t.Fatalf("topic %q", msg.Topic)
	}
	if key, _ := msg.Key.Encode(); string(key) != "host-1" {
		t.Fatalf("key %q, want the original record's", key)
	}
	headers := map[string]string{}
	for _, h := range msg.Headers {
		headers[string(h.Key)] = string(h.Value)
	}
	if headers["patchflow-original-offset"] != "42" || headers["patchflow-original-partition"] != "3" ||
		headers["patchflow-error-class"] != "ERROR_CLASS_UNKNOWN" || headers["patchflow-original-topic"] != "events" ||
		headers["patchflow-reason"] != "unknown" {
		t.Fatalf("headers %v", headers)
	}
}

// An envelope the topic refuses as too large is written again without the
// original value, flagged, with the value's size and SHA-256 and everything
// else kept (its quotes are too short to cut).
func TestDeadLetterTooLargeWrittenWithoutValue(t *testing.T) {
	p := &fakeProducer{limit: 4096}
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq"}
	value := bytes.Repeat([]byte("x"), 10_000)
	letter := fullLetter(value) // ValueSize left unset: Write fills it from the value
	original := proto.CloneOf(letter)
	if err := w.Write(context.Background(), letter); err != nil {
		t.Fatal(err)
	}
	if len(p.attempts) != 2 || len(p.stored) != 1 {
		t.Fatalf("%d sends, %d stored; want 2 sends (whole, then without the value) and 1 stored", len(p.attempts), len(p.stored))
	}
	if !bytes.Equal(p.attempts[0].GetValue(), value) || p.attempts[0].GetValueTruncated() {
		t.Fatal("the first send did not carry the whole value")
	}
	got := p.attempts[1]
	if len(got.GetValue()) != 0 || !got.GetValueTruncated() || got.GetValueSize() != int64(len(value)) {
		t.Fatalf("second send: value %d bytes, value_truncated %v, value_size %d; want 0, true, %d",
			len(got.GetValue()), got.GetValueTruncated(), got.GetValueSize(), len(value))
	}
	want := proto.CloneOf(original)
	want.Value, want.ValueTruncated, want.ValueSize = nil, true, int64(len(value))
	sum := sha256.Sum256(value)
	want.ValueCut = &messages.Cut{Size: int64(len(value)), Sha256: sum[:]}
	if !proto.Equal(got, want) {
		t.Fatalf("the truncated envelope lost more than the value:\n got %v\nwant %v", got, want)
	}
	if !proto.Equal(letter, original) {
		t.Fatal("Write changed the caller's letter")
	}
}

// An envelope the producer refuses before sending it, as over its own
// limit, goes through Large, whole: its size before compression does not
// say whether it fits the topic. Only when the topic refuses it there too is
// it written again without the value.
func TestDeadLetterOverProducerLimitGoesThroughLarge(t *testing.T) {
	value := bytes.Repeat([]byte("x"), 10_000)
	t.Run("fits the topic", func(t *testing.T) {
		p, large := &fakeProducer{own: 4096}, &fakeProducer{}
		w := &actors.KafkaDeadLetters{Producer: p, Large: large, Topic: "events.dlq"}
		if err := w.Write(context.Background(), fullLetter(value)); err != nil {
			t.Fatal(err)
		}
		if len(p.attempts) != 1 || len(p.stored) != 0 || len(large.attempts) != 1 || len(large.stored) != 1 {
			t.Fatalf("producer: %d sends, %d stored; large: %d sends, %d stored; want 1, 0; 1, 1",
				len(p.attempts), len(p.stored), len(large.attempts), len(large.stored))
		}
		if got := large.attempts[0]; got.GetValueTruncated() || !bytes.Equal(got.GetValue(), value) {
			t.Fatal("the envelope went through Large without its whole value")
		}
	})
	t.Run("too large for the topic", func(t *testing.T) {
		p, large := &fakeProducer{own: 4096}, &fakeProducer{limit: 4096}
		w := &actors.KafkaDeadLetters{Producer: p, Large: large, Topic: "events.dlq"}
		if err := w.Write(context.Background(), fullLetter(value)); err != nil {
			t.Fatal(err)
		}
		if len(large.attempts) != 1 || len(large.stored) != 0 || len(p.attempts) != 2 || len(p.stored) != 1 {
			t.Fatalf("large: %d sends, %d stored; producer: %d sends, %d stored; want 1, 0; 2, 1",
				len(large.attempts), len(large.stored), len(p.attempts), len(p.stored))
		}
		if got := p.attempts[1]; len(got.GetValue()) != 0 || !got.GetValueTruncated() || got.GetValueSize() != int64(len(value)) {
			t.Fatalf("written again with value %d bytes, value_truncated %v, value_size %d; want 0, true, %d",
				len(got.GetValue()), got.GetValueTruncated(), got.GetValueSize(), len(value))
		}
	})
}

// Too large even cut to its least: the error says which limit to raise and
// still is sarama's error underneath.
func TestDeadLetterTooLargeWithoutValueSaysWhatToRaise(t *testing.T) {
	p := &fakeProducer{limit: 64}
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq"}
	err := w.Write(context.Background(), fullLetter(bytes.Repeat([]byte("v"), 1000)))
	if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		t.Fatalf("error %v does not wrap sarama.ErrMessageSizeTooLarge", err)
	}
	if !strings.Contains(err.Error(), "raise max.message.bytes of topic events.dlq") {
		t.Fatalf("error %q does not say what to raise", err)
	}
	if len(p.attempts) != 2 {
		t.Fatalf("%d sends, want 2", len(p.attempts))
	}
}

func TestDeadLetterErrorsSayWhatToFix(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{sarama.ErrUnknownTopicOrPartition, "dead-letter topic events.dlq does not exist: create it (the consumer creates it at start when it can)"},
		{sarama.ErrTopicAuthorizationFailed, "grant the consumer's principal WRITE on topic events.dlq"},
		{sarama.ErrClusterAuthorizationFailed, "grant the consumer's principal WRITE on topic events.dlq"},
		{fmt.Errorf("connect: %w", sarama.ErrSASLAuthenticationFailed), "check the SASL mechanism, user and password"},
		{breaker.ErrBreakerOpen, "the topic is missing or has no leader; create it"},
		{sarama.ErrNotEnoughReplicas, "write dead letter to events.dlq"},
	}
	for _, c := range cases {
		w := &actors.KafkaDeadLetters{Producer: &fakeProducer{fail: c.err}, Topic: "events.dlq"}
		err := w.Write(context.Background(), fullLetter([]byte("v")))
		if !errors.Is(err, c.err) {
			t.Errorf("%v: error %v does not wrap it", c.err, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %q does not say %q", c.err, err, c.want)
		}
	}
}

// blockingProducer's SendMessage blocks until released, like a send retrying
// against an unreachable broker.
type blockingProducer struct {
	sarama.SyncProducer
	entered, returned chan struct{}
	release           chan struct{}
}

func (p *blockingProducer) SendMessage(*sarama.ProducerMessage) (int32, int64, error) {
	close(p.entered)
	<-p.release
	defer close(p.returned)
	return 0, 0, nil
}

// Write returns ctx.Err() promptly when ctx ends while a send is blocked,
// and the abandoned send's goroutine ends once the send returns.
func TestDeadLetterWriteReturnsWhenContextEnds(t *testing.T) {
	p := &blockingProducer{entered: make(chan struct{}), returned: make(chan struct{}), release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(p.release)
		}
	}
	defer release()
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- w.Write(ctx, fullLetter([]byte("v"))) }()
	select {
	case <-p.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the send never started")
	}
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Write returned %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Write still blocked 2s after its context was cancelled")
	}
	release()
	select {
	case <-p.returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned send did not return after its release")
	}
	// goleak (TestMain) fails the package if the send's goroutine outlived it.
}

func TestDeadLetterWriteOnDoneContextSendsNothing(t *testing.T) {
	p := &fakeProducer{}
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Write(ctx, fullLetter([]byte("v"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write returned %v, want context.Canceled", err)
	}
	if len(p.attempts) != 0 {
		t.Fatalf("%d sends on a done context", len(p.attempts))
	}
}

// readEnvelopes reads n envelopes from partition 0 of topic.
func readEnvelopes(t *testing.T, brokers []string, topic string, n int) []*messages.DeadLetter {
	t.Helper()
	consumer, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []*messages.DeadLetter
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			var l messages.DeadLetter
			if err := proto.Unmarshal(m.Value, &l); err != nil {
				t.Fatal(err)
			}
			out = append(out, &l)
		case <-deadline:
			t.Fatalf("read %d of %d dead letters from %s", len(out), n, topic)
		}
	}
	return out
}

// Against a broker, the dead-letter producers compress: an envelope goes
// whole when it fits the topic compressed, even when it is over the
// producer's limit (or the topic's) uncompressed; only one that does not
// fit even compressed goes without its value. The small ones go whole, and
// the idempotent producers keep writing after a refusal.
func TestDeadLetterSizeLimitsOnBroker(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	checkDeadLetterSizeLimits(t, cluster.ListenAddrs(), sarama.V3_6_0_0)
}

// The same on a real Apache Kafka broker, when PATCHFLOW_KAFKA_BROKERS names
// one (make test-kafka).
func TestRealBrokerDeadLetterSizeLimits(t *testing.T) {
	brokers := os.Getenv("PATCHFLOW_KAFKA_BROKERS")
	if brokers == "" {
		t.Skip("PATCHFLOW_KAFKA_BROKERS is not set (make test-kafka runs this against a real broker)")
	}
	version := sarama.V3_6_0_0
	if v := os.Getenv("PATCHFLOW_KAFKA_VERSION"); v != "" {
		var err error
		if version, err = sarama.ParseKafkaVersion(v); err != nil {
			t.Fatal(err)
		}
	}
	checkDeadLetterSizeLimits(t, strings.Split(brokers, ","), version)
}

func checkDeadLetterSizeLimits(t *testing.T, brokers []string, version sarama.KafkaVersion) {
	random := make([]byte, 10_000)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random) // never fails
	packages := packageList(20_000)
	cases := []struct {
		name          string
		topicLimit    int // the topic's max.message.bytes
		producerLimit int // KafkaSettings.DeadLetterMaxBytes
		value         []byte
		whole         bool
	}{
		{"incompressible over the topic's limit", 4096, 0, random, false},
		{"incompressible over the producer's limit only", 1 << 20, 4096, random, true},
		{"compressible over both limits", 4096, 4096, packages, true},
		{"incompressible over both limits", 4096, 4096, random, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := fmt.Sprintf("dlq-%d", time.Now().UnixNano())
			createLimitedTopic(t, brokers, version, topic, c.topicLimit)
			w, err := actors.NewKafkaDeadLetters(actors.KafkaSettings{Brokers: brokers, Version: version, DLQTopic: topic, DeadLetterMaxBytes: c.producerLimit})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			letters := []*messages.DeadLetter{fullLetter([]byte("before")), fullLetter(c.value), fullLetter([]byte("after"))}
			for _, l := range letters {
				l.ValueSize = int64(len(l.GetValue()))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := w.Write(ctx, l)
				cancel()
				if err != nil {
					t.Fatalf("write of a %d-byte value: %v", len(l.GetValue()), err)
				}
			}
			got := readEnvelopes(t, brokers, topic, 3)
			if !proto.Equal(got[0], letters[0]) || !proto.Equal(got[2], letters[2]) {
				t.Fatalf("small envelopes not stored whole: %v, %v", got[0], got[2])
			}
			switch big := got[1]; {
			case c.whole && (big.GetValueTruncated() || !bytes.Equal(big.GetValue(), c.value)):
				t.Fatalf("envelope stored with value %d bytes, truncated %v; want the whole %d bytes",
					len(big.GetValue()), big.GetValueTruncated(), len(c.value))
			case !c.whole && (len(big.GetValue()) != 0 || !big.GetValueTruncated() || big.GetValueSize() != int64(len(c.value))):
				t.Fatalf("oversized envelope stored with value %d bytes, truncated %v, size %d; want none, true, %d",
					len(big.GetValue()), big.GetValueTruncated(), big.GetValueSize(), len(c.value))
			}
		})
	}
}

// packageList returns n bytes of a JSON list of package names, as an
// inventory event carries them: text that compresses several times over.
func packageList(n int) []byte {
	names := []string{"kernel", "openssl-libs", "glibc", "bash", "systemd", "python3-libs", "curl", "NetworkManager"}
	out := []byte(`{"installed_packages":[`)
	for i := 0; len(out) < n; i++ {
		out = fmt.Appendf(out, `"%s-%d.%d.%d-%d.el9.x86_64",`, names[i%len(names)], i%7, i%13, i%31, i%5)
	}
	return out[:n]
}

// createLimitedTopic creates a one-partition topic with max.message.bytes
// limit and waits until it can be written (a real broker acknowledges a
// creation before its metadata has spread).
func createLimitedTopic(t *testing.T, brokers []string, version sarama.KafkaVersion, topic string, limit int) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = version
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v := strconv.Itoa(limit)
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"max.message.bytes": &v}}, false); err != nil {
		t.Fatal(err)
	}
	waitForLeader(t, admin, topic)
}

// waitForLeader waits until the one partition of a topic just created has a
// leader: a real broker acknowledges a creation before its metadata has
// spread, and a producer that comes too early fails once its few retries
// are spent.
func waitForLeader(t *testing.T, admin sarama.ClusterAdmin, topic string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		metas, err := admin.DescribeTopics([]string{topic})
		if err == nil && len(metas) == 1 && metas[0].Err == sarama.ErrNoError && len(metas[0].Partitions) == 1 && metas[0].Partitions[0].Leader >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not visible 10s after its creation: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
