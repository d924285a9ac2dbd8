package consumer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/offsets"
)

// --- records whose dead letter quotes too much to fit whole ----------------

// Two dead-letter topics made by hand (the listener warns, and uses them),
// each too small for the records' envelopes as they were written: one of
// the broker's default limit, 1 MiB, with the gzip a protocol version
// before 2.1.0 gets, which does not find the key's second copy 600 KB
// away; one of 512 KiB, for which zstd finding it is not enough.
// The first takes both envelopes with everything but their quotes whole;
// the second takes neither the event (600 KB) nor the key whole, so those
// are left out, each with its Cut.
var quoteCases = []struct {
	name     string
	version  string
	dlqLimit int
	whole    bool
}{
	{"gzip, dead-letter topic of 1 MiB", "2.0.0", 1 << 20, true},
	{"zstd, dead-letter topic of 512 KiB", "3.6.0", 512 << 10, false},
}

func TestListenerDeadLettersRecordsThatQuoteTooMuch(t *testing.T) {
	for _, c := range quoteCases {
		t.Run(c.name, func(t *testing.T) { checkQuotesCutToFit(t, kfakeBroker(t, nil), c.version, c.dlqLimit, c.whole) })
	}
}

func TestRealBrokerListenerDeadLettersRecordsThatQuoteTooMuch(t *testing.T) {
	brokers, version := realBroker(t)
	for _, c := range quoteCases {
		if mustVersion(t, version).IsAtLeast(mustVersion(t, c.version)) {
			t.Run(c.name, func(t *testing.T) { checkQuotesCutToFit(t, brokers, c.version, c.dlqLimit, c.whole) })
		}
	}
}

// checkQuotesCutToFit has a listener dead-letter, on one partition of a
// topic of the broker's default limit (1 MiB), to a dead-letter topic of
// dlqLimit made by hand (the listener warns, and uses it), two records
// whose envelopes quoted more than that topic holds:
//
//   - an inventory event whose one package has an epoch of 600,000
//     letters: refused as an unparsable package, with an error that quoted
//     the epoch whole, and the envelope carries the error twice (error and
//     history);
//   - a record with a key of 600,000 random bytes and a value of 440,000,
//     as much as the topic holds, which the dead-letter record carried
//     twice (its own Kafka key, and the envelope's key).
//
// Both must be dead-lettered, and the partition committed past them: the
// first with its error quoting at most 64 bytes of the epoch, the second in
// a dead-letter record keyed by the key's marker; with whole, with their
// keys and values whole, else with the event and the key left out, each
// with a Cut of its size and SHA-256 (the key record's value still whole).
// Before, the second envelope was refused even without its value, its
// write retried for good, and the partition's committed offset stayed at
// the record. No log line may quote either field whole.
func checkQuotesCutToFit(t *testing.T, brokers []string, version string, dlqLimit int, whole bool) {
	admin := testAdmin(t, brokers, version)
	topic := uniqueName("quotes")
	dlq := topic + ".small-dlq"
	createTopic(t, admin, topic, 1, 1<<20)
	createTopic(t, admin, dlq, 1, dlqLimit)

	r := rand.New(rand.NewChaCha8([32]byte{3}))
	epoch := make([]byte, 600_000)
	for i := range epoch {
		epoch[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[r.IntN(52)]
	}
	event := []byte(`{"type":"created","timestamp":"2026-03-01T12:00:00Z","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b",` +
		`"org_id":"org-1","reporter":"puptoo","system_profile":{"installed_packages":["kernel-` + string(epoch) + `:4.18.0-305.el8.x86_64"]}}}`)
	key, value := randomBytes(600_000), randomBytes(1_040_000)[600_000:]
	records := []*sarama.ProducerMessage{
		{Topic: topic, Key: sarama.StringEncoder("8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b"), Value: sarama.ByteEncoder(event)},
		{Topic: topic, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value)},
	}
	pcfg := sarama.NewConfig()
	pcfg.Version = mustVersion(t, version)
	pcfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range records {
		if _, _, err := producer.SendMessage(m); err != nil {
			_ = producer.Close()
			t.Fatalf("produce a record of %d bytes: %v", m.ByteSize(2), err)
		}
	}
	_ = producer.Close()

	group := uniqueName("quotes")
	cfg := testConfig(brokers, version, topic, group)
	cfg.DeadLetterTopic = dlq
	if !mustVersion(t, version).IsAtLeast(sarama.V2_4_0_0) {
		cfg.Assignor = "range" // cooperative-sticky needs 2.4.0
	}
	opts := inventory.DefaultValidationOptions()
	handler := HandlerFunc(func(_ context.Context, r *Record) error {
		if _, err := inventory.DecodeInventoryEvent(r.Value, opts); err != nil {
			return err // the listener's decoding: refused as broken, permanent
		}
		return Permanent(fmt.Errorf("event at offset %d accepted by the decoder", r.Offset))
	})
	logs := &longestLine{}
	run := start(t, cfg, handler, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	defer func() { _ = run.Stop() }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := offsets.Read(brokers, topic, group)
		if err == nil && p.Committed[0] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the partition did not commit past both records within 30s (progress %+v, error %v)", p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := readDeadLetterRecords(t, brokers, version, dlq, 2)
	letters := map[int64]*messages.DeadLetter{}
	keys := map[int64][]byte{}
	for _, m := range got {
		var l messages.DeadLetter
		if err := proto.Unmarshal(m.Value, &l); err != nil {
			t.Fatal(err)
		}
		if l.GetOriginalTopic() != topic || l.GetOriginalPartition() != 0 {
			t.Fatalf("a dead letter names %s/%d, not %s/0", l.GetOriginalTopic(), l.GetOriginalPartition(), topic)
		}
		letters[l.GetOriginalOffset()], keys[l.GetOriginalOffset()] = &l, m.Key
	}

	bad := letters[0]
	if bad == nil {
		t.Fatal("no dead letter names offset 0, the event with the long epoch")
	}
	if bad.GetReason() != string(inventory.ReasonUnparsablePackage) || len(bad.GetError()) > 1024 ||
		strings.Contains(bad.GetError(), string(epoch[:65])) {
		t.Fatalf("dead letter of the event with a %d-byte epoch: reason %q, error of %d bytes; want %q, the epoch quoted at most 64 bytes",
			len(epoch), bad.GetReason(), len(bad.GetError()), inventory.ReasonUnparsablePackage)
	}
	checkKept(t, "the event's value", event, bad.GetValue(), bad.GetValueCut(), whole)

	keyed := letters[1]
	if keyed == nil {
		t.Fatal("no dead letter names offset 1, the record with the long key")
	}
	checkKept(t, "the long key", key, keyed.GetKey(), keyed.GetKeyCut(), whole)
	checkKept(t, "the value of the record with the long key", value, keyed.GetValue(), keyed.GetValueCut(), true)
	sum := sha256.Sum256(key)
	if want := fmt.Sprintf("truncated, %d bytes, sha256 %s", len(key), hex.EncodeToString(sum[:])); string(keys[1]) != want {
		t.Fatalf("the dead-letter record of the record with a long key is keyed %.80q (%d bytes), want %q", keys[1], len(keys[1]), want)
	}
	if n := logs.max(); n > 16<<10 {
		t.Fatalf("a log line of %d bytes: one quotes a field whole", n)
	}
}

// checkKept fails unless got is want whole (with whole), or left out with
// a Cut of its size and SHA-256 (without).
func checkKept(t *testing.T, what string, want, got []byte, cut *messages.Cut, whole bool) {
	t.Helper()
	sum := sha256.Sum256(want)
	switch {
	case whole && (cut != nil || !bytes.Equal(got, want)):
		t.Fatalf("%s: %d bytes kept, cut %v; want the %d bytes whole", what, len(got), cut, len(want))
	case !whole && (len(got) != 0 || cut.GetSize() != int64(len(want)) || !bytes.Equal(cut.GetSha256(), sum[:])):
		t.Fatalf("%s: %d bytes kept, cut %v; want it left out, cut as %d bytes, sha256 %x", what, len(got), cut, len(want), sum)
	}
}

// longestLine is a log writer that keeps only the length of its longest
// write (one line per record with slog's handlers).
type longestLine struct {
	mu      sync.Mutex
	longest int
}

func (w *longestLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.longest = max(w.longest, len(p))
	return len(p), nil
}

func (w *longestLine) max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// readDeadLetterRecords waits up to 30 s for the first n records on
// partition 0 of topic.
func readDeadLetterRecords(t *testing.T, brokers []string, version, topic string, n int) []*sarama.ConsumerMessage {
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
	var out []*sarama.ConsumerMessage
	deadline := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case <-deadline:
			t.Fatalf("%d of %d dead letters on %s within 30s", len(out), n, topic)
		}
	}
	return out
}
