package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/dlq"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// capturingProducer keeps what the dead-letter writer sends, as a broker
// would store it.
type capturingProducer struct {
	sarama.SyncProducer // the rest is never called
	sent                chan *sarama.ProducerMessage
}

func (p *capturingProducer) SendMessage(m *sarama.ProducerMessage) (int32, int64, error) {
	p.sent <- m
	return 0, 7, nil
}

type noMarks struct{}

func (noMarks) MarkOffset(string, int32, int64, string)  {}
func (noMarks) ResetOffset(string, int32, int64, string) {}

// listenerEnvelope runs one record through a partition actor, as the
// listener does, with a handler that fails it with fail, and returns the
// dead-letter record the listener's writer sent, as a consumer reads it
// back from partition 0, offset 7 of the dead-letter topic.
func listenerEnvelope(t *testing.T, record *messages.Record, fail error) *sarama.ConsumerMessage {
	t.Helper()
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	t.Cleanup(system.Shutdown)
	producer := &capturingProducer{sent: make(chan *sarama.ProducerMessage, 1)}
	settings := actors.DefaultSettings()
	settings.ConsumerGroup = "patchflow-listener"
	settings.BackoffMin, settings.BackoffMax = time.Millisecond, time.Millisecond
	settings.EvidenceWindow = 50 * time.Millisecond
	pa := actors.NewPartitionActor(actors.PartitionConfig{
		Topic: record.GetTopic(), Partition: record.GetPartition(), Epoch: 1, Settings: settings,
		Handler: actors.HandlerFunc(func(_ context.Context, r *messages.Record) error {
			if r.GetOffset() == record.GetOffset() {
				return fail
			}
			return nil
		}),
		DeadLetters: &actors.KafkaDeadLetters{Producer: producer, Topic: "events.dlq"},
		Marker:      noMarks{}, Stats: &actors.Stats{}, Logger: slog.New(slog.DiscardHandler),
	})
	pid := system.Root.Spawn(pa.Props())
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	system.Root.Send(pid, &messages.RecordAdmitted{Record: record})
	// Other records handled meanwhile make a failure that names no
	// dependency the record's own (the retry rule judges it by them).
	others := time.NewTicker(2 * time.Millisecond)
	defer others.Stop()
	var m *sarama.ProducerMessage
	deadline := time.After(10 * time.Second)
	for next := record.GetOffset() + 1; m == nil; next++ {
		select {
		case m = <-producer.sent:
		case <-others.C:
			system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: record.GetTopic(), Partition: record.GetPartition(),
				Offset: next, Key: []byte(fmt.Sprint("other-", next)), Value: []byte("{}")}})
		case <-deadline:
			t.Fatal("the partition actor wrote no dead letter")
		}
	}
	value, err := m.Value.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, err := m.Key.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cm := &sarama.ConsumerMessage{Topic: m.Topic, Partition: 0, Offset: 7, Key: key, Value: value, Timestamp: time.Now()}
	for _, h := range m.Headers {
		cm.Headers = append(cm.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return cm
}

// An envelope the listener wrote for a broken message decodes into the line
// an operator reads: time given up, origin, key, reason, attempts, error,
// its place in the dead-letter topic; the value only when asked for.
func TestDecodeListenerEnvelope(t *testing.T) {
	before := time.Now()
	value := `{"type":"created","host":{"id":` // broken
	record := &messages.Record{Topic: "platform.inventory.events", Partition: 3, Offset: 42, Key: []byte("host-1"), Value: []byte(value)}
	fail := fmt.Errorf("decode event: %w", messages.Permanent(&messages.ValidationError{Reason: inventory.ReasonMalformedJSON, Detail: "unexpected end of JSON input"}))
	m := listenerEnvelope(t, record, fail)

	e := dlq.Decode(m)
	if e.Letter == nil {
		t.Fatalf("the listener's envelope does not decode: %s", e.Problem)
	}
	at := e.Letter.GetLastFailureTime().AsTime()
	if at.Before(before) || at.After(time.Now()) {
		t.Fatalf("given up at %v, not during the test", at)
	}
	stamp := at.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	want := stamp + ` platform.inventory.events/3/42 key="host-1" reason="malformed JSON" attempts=1` +
		` error="decode event: malformed JSON: unexpected end of JSON input" dlq=0/7`
	if got := e.Line(false); got != want {
		t.Fatalf("line\n got %s\nwant %s", got, want)
	}
	if got, wantValue := e.Line(true), want+` value="{\"type\":\"created\",\"host\":{\"id\":"`; got != wantValue {
		t.Fatalf("line with the value\n got %s\nwant %s", got, wantValue)
	}

	b, err := e.JSON(false)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"topic": "platform.inventory.events", "partition": 3.0, "offset": 42.0, "key": "host-1",
		"reason": "malformed JSON", "error_class": "permanent", "attempts": 1.0, "consumer_group": "patchflow-listener",
		"dlq_partition": 0.0, "dlq_offset": 7.0, "value_size": float64(len(value)), "time": at.UTC().Format(time.RFC3339Nano)} {
		if j[k] != v {
			t.Errorf("json %s = %v, want %v (%s)", k, j[k], v, b)
		}
	}
	if _, has := j["value"]; has {
		t.Errorf("json carries the value without -value: %s", b)
	}
	if h, _ := j["history"].([]any); len(h) != 1 {
		t.Errorf("json history %v, want the one failed attempt", j["history"])
	}
	if b, _ := e.JSON(true); !strings.Contains(string(b), `"value":"{\"type\":\"created\",\"host\":{\"id\":"`) {
		t.Errorf("json with -value lacks the value: %s", b)
	}
}

// The reason of a record given up after its own failures is the class of
// the last one; an envelope from before the reason field gets it from its
// class and error text; binary keys and values are base64 in JSON.
func TestDecodeReasons(t *testing.T) {
	record := &messages.Record{Topic: "events", Partition: 0, Offset: 5, Key: []byte{0xff, 0x00}, Value: []byte{0xfe}}
	e := dlq.Decode(listenerEnvelope(t, record, errors.New("nil map in handler")))
	// Its own failures reach MaxAttempts; it retried at its backoff while
	// their verdicts ripened, so its attempts are at least that (and so
	// may its own failures be: verdicts that ripen together all count).
	max := int32(actors.DefaultSettings().MaxAttempts)
	if e.Letter == nil || dlq.Reason(e.Letter) != "unknown" || e.Letter.GetOwnFailures() < max || e.Letter.GetAttempts() < e.Letter.GetOwnFailures() {
		t.Fatalf("decoded %v (%s)", e.Letter, e.Problem)
	}
	b, err := e.JSON(false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"blame":"own"`) {
		t.Fatalf("json history does not say which failures were judged own: %s", b)
	}
	if !strings.Contains(e.Line(false), `key="\xff\x00" reason="unknown"`) {
		t.Fatalf("line %s", e.Line(false))
	}
	if b, _ := e.JSON(true); !strings.Contains(string(b), `"key_base64":"/wA="`) || !strings.Contains(string(b), `"value_base64":"/g=="`) {
		t.Fatalf("json %s", b)
	}

	old := &messages.DeadLetter{OriginalTopic: "events", ErrorClass: messages.ErrorClass_ERROR_CLASS_PERMANENT,
		Error: "decode: missing org id: host.org_id is missing"}
	if r := dlq.Reason(old); r != "missing org id" {
		t.Fatalf("reason of an envelope without one: %q", r)
	}
	old.Error = "host 42 not found"
	if r := dlq.Reason(old); r != "permanent" {
		t.Fatalf("reason of an old permanent envelope: %q", r)
	}
	truncated := &messages.DeadLetter{OriginalTopic: "events", ValueTruncated: true, ValueSize: 2_000_000, Reason: "message too large"}
	body, _ := proto.Marshal(truncated)
	line := dlq.Decode(&sarama.ConsumerMessage{Value: body}).Line(true)
	if !strings.HasSuffix(line, " value_truncated=true value_size=2000000") {
		t.Fatalf("truncated value: %s", line)
	}
}

// A record that is not an envelope says so, with where it is and why.
func TestDecodeNotAnEnvelope(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, value := range [][]byte{[]byte(`{"type":"created"}`), nil} {
		e := dlq.Decode(&sarama.ConsumerMessage{Partition: 2, Offset: 9, Value: value, Timestamp: at})
		if e.Letter != nil {
			t.Fatalf("%q decoded as an envelope: %v", value, e.Letter)
		}
		want := fmt.Sprintf("2025-03-01T12:00:00.000Z dlq=2/9 not a dead-letter envelope (%d bytes): ", len(value))
		if line := e.Line(true); !strings.HasPrefix(line, want) || len(line) == len(want) {
			t.Fatalf("line %q, want %q and why", line, want)
		}
		b, _ := e.JSON(false)
		var j map[string]any
		if err := json.Unmarshal(b, &j); err != nil || j["not_envelope"] == "" || j["dlq_offset"] != 9.0 {
			t.Fatalf("json %s (%v)", b, err)
		}
	}
}

// An envelope cut to fit its topic shows the marker of each field it left
// out, in the line and the JSON: enough to match it to the source record,
// which its topic/partition/offset name.
func TestDecodeCutEnvelope(t *testing.T) {
	key := []byte(strings.Repeat("k", 3000))
	value := []byte(strings.Repeat("v", 5000))
	headers := []*messages.Header{{Key: []byte("trace"), Value: []byte(strings.Repeat("h", 2000))}}
	record := &messages.Record{Topic: "platform.inventory.events", Partition: 3, Offset: 42, Key: key, Value: value, Headers: headers}
	failures := []*messages.FailedAttempt{{Attempt: 1, ErrorClass: messages.ErrorClass_ERROR_CLASS_PERMANENT, Error: "refused: " + string(value)}}
	letter := actors.FitDeadLetter(actors.NewDeadLetter(record, failures, "patchflow-listener", messages.ReasonPermanent), 4096)
	body, err := proto.Marshal(letter)
	if err != nil {
		t.Fatal(err)
	}
	e := dlq.Decode(&sarama.ConsumerMessage{Partition: 0, Offset: 7, Value: body})
	keyCut, headersCut, valueCut := messages.CutMarker(key), messages.CutOfHeaders(headers).Marker(), messages.CutMarker(value)
	if !strings.HasPrefix(headersCut, "1 header, truncated, 2005 bytes, sha256 ") {
		t.Errorf("headers cut as %q", headersCut)
	}
	line := e.Line(true)
	for _, want := range []string{" platform.inventory.events/3/42 key=\"\" ", ` key_cut="` + keyCut + `"`, ` headers_cut="` + headersCut + `"`,
		` value_truncated=true value_size=5000 value_cut="` + valueCut + `"`, `[` + messages.CutMarker([]byte("refused: "+string(value))) + `]"`} {
		if !strings.Contains(line, want) {
			t.Errorf("line %s\nlacks %s", line, want)
		}
	}
	b, err := e.JSON(true)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"key_cut": keyCut, "headers_cut": headersCut, "value_cut": valueCut, "value_truncated": true, "offset": 42.0} {
		if j[k] != v {
			t.Errorf("json %s = %v, want %v", k, j[k], v)
		}
	}
}
