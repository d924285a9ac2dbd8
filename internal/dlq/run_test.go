package dlq_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/dlq"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/safetext"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
	"github.com/patchflow/patchflow/proving/simulated"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// startListener runs the listener on an in-process broker (kfake) with its
// default topics and a handler that fails records by their value: "not
// json" is a broken message, "unknown host" a permanent failure, "flaky"
// fails unclassified every time; the rest succeed. A failure that names no
// dependency is judged by the other records: "flaky" is dead-lettered only
// while others are handled just after its failures (waitDeadLettersAmid).
func startListener(t *testing.T) *listener.Config {
	t.Helper()
	cfg, _, err := parseListener(nil, env(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "simulated",
		"LISTENER_HTTP_ADDR": "", "LISTENER_PROGRESS_INTERVAL": "0", "LISTENER_MAX_ATTEMPTS": "2",
		"LISTENER_BACKOFF_MIN": "1ms", "LISTENER_BACKOFF_MAX": "1ms", "LISTENER_EVIDENCE_WINDOW": "100ms"}))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := embedded.Start(1, cfg.Kafka.Topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg.Brokers, cfg.Kafka.Brokers = cluster.Addrs(), cluster.Addrs()
	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		switch string(r.Value) {
		case "not json":
			return fmt.Errorf("decode event: %w", messages.Permanent(&messages.ValidationError{Reason: inventory.ReasonMalformedJSON, Detail: "invalid character 'o' in literal null"}))
		case "unknown host":
			return messages.Permanent(errors.New("host not found in inventory"))
		case "flaky":
			return errors.New("nil map in handler")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- listener.RunWith(ctx, cfg, handler, slog.New(slog.DiscardHandler), listener.Hooks{}) }()
	t.Cleanup(func() { cancel(); <-done })
	return cfg
}

// produce writes key=value records to topic.
func produce(t *testing.T, brokers []string, topic string, kv ...string) {
	t.Helper()
	pcfg := sarama.NewConfig()
	pcfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i+1 < len(kv); i += 2 {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(kv[i]), Value: sarama.StringEncoder(kv[i+1])}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitDeadLetters waits until the dead-letter topic holds n records.
func waitDeadLetters(t *testing.T, cfg *listener.Config, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := offsets.Read(cfg.Brokers, cfg.Kafka.DLQTopic, "")
		if err == nil && p.Total() == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead-letter topic never held %d records (%v, %v)", n, p.Ends, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDeadLettersAmid waits until the dead-letter topic holds n records,
// producing records that succeed meanwhile (every 10 ms, each of a key of
// its own): the evidence that a failing record's failures are its own.
func waitDeadLettersAmid(t *testing.T, cfg *listener.Config, n int64) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pcfg := sarama.NewConfig()
		pcfg.Producer.Return.Successes = true
		p, err := sarama.NewSyncProducer(cfg.Brokers, pcfg)
		if err != nil {
			t.Error(err)
			return
		}
		defer p.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_, _, _ = p.SendMessage(&sarama.ProducerMessage{Topic: cfg.Kafka.Topic, Key: sarama.StringEncoder(fmt.Sprint("other-", i)), Value: sarama.StringEncoder("fine")})
		}
	}()
	defer func() { close(stop); <-done }()
	waitDeadLetters(t, cfg, n)
}

func lines(b []byte) []string {
	var out []string
	for s := bufio.NewScanner(bytes.NewReader(b)); s.Scan(); {
		out = append(out, s.Text())
	}
	return out
}

// The command reads the dead-letter topic the listener wrote, with the
// listener's settings and defaults, and prints a line per record, in
// order; a record that is not an envelope gets a line saying so and the
// reading goes on to the end, where the command stops. -offset starts
// further on, -json prints objects, -partition must name a partition.
func TestRunPrintsTheDeadLetterTopic(t *testing.T) {
	lcfg := startListener(t)
	produce(t, lcfg.Brokers, lcfg.Kafka.Topic, "host-0", "fine", "host-1", "not json")
	waitDeadLetters(t, lcfg, 1)
	produce(t, lcfg.Brokers, lcfg.Kafka.DLQTopic, "stray", `{"type":"created"}`) // another producer's record
	produce(t, lcfg.Brokers, lcfg.Kafka.Topic, "host-3", "unknown host")
	waitDeadLetters(t, lcfg, 3) // one at a time: records of different keys finish in any order
	produce(t, lcfg.Brokers, lcfg.Kafka.Topic, "host-4", "fine", "host-5", "flaky")
	waitDeadLettersAmid(t, lcfg, 4)

	brokers := strings.Join(lcfg.Brokers, ",")
	run := func(args ...string) (dlq.Summary, []string, error) {
		t.Helper()
		cfg, _, err := dlq.Parse(args, env(map[string]string{"KAFKA_BROKERS": brokers}))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Topic != lcfg.Kafka.DLQTopic {
			t.Fatalf("reads %s by default, the listener writes %s", cfg.Topic, lcfg.Kafka.DLQTopic)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out bytes.Buffer
		sum, err := dlq.Run(ctx, cfg, &out)
		if ctx.Err() != nil {
			t.Fatal("the command did not stop at the end of the topic")
		}
		return sum, lines(out.Bytes()), err
	}

	sum, got, err := run()
	if err != nil || sum != (dlq.Summary{Letters: 3, NotEnvelope: 1}) || len(got) != 4 {
		t.Fatalf("summary %+v, error %v, lines:\n%s", sum, err, strings.Join(got, "\n"))
	}
	for i, want := range []string{
		` platform.inventory.events/0/1 key="host-1" reason="malformed JSON" attempts=1 error="decode event: malformed JSON: invalid character 'o' in literal null" dlq=0/0`,
		` dlq=0/1 not a dead-letter envelope (18 bytes): `,
		` platform.inventory.events/0/2 key="host-3" reason="permanent" attempts=1 error="host not found in inventory" dlq=0/2`,
		// Its attempts: at least MaxAttempts, more when a failure found no
		// record handled in its window (held, not counted).
		` platform.inventory.events/0/4 key="host-5" reason="unknown" attempts=`,
	} {
		if !strings.Contains(got[i], want) {
			t.Errorf("line %d\n%s\nlacks\n%s", i, got[i], want)
		}
		if strings.Contains(got[i], "value=") || strings.Contains(got[i], "fine") {
			t.Errorf("line %d prints a value without -value: %s", i, got[i])
		}
	}

	if want := `error="nil map in handler" dlq=0/3`; len(got) > 3 && !strings.Contains(got[3], want) {
		t.Errorf("line 3\n%s\nlacks\n%s", got[3], want)
	}

	sum, got, err = run("-offset", "2", "-json", "-value")
	if err != nil || sum != (dlq.Summary{Letters: 2}) || len(got) != 2 {
		t.Fatalf("-offset 2: summary %+v, error %v, lines:\n%s", sum, err, strings.Join(got, "\n"))
	}
	for i, want := range []struct {
		offset float64
		reason string
		value  string
	}{{2, "permanent", "unknown host"}, {4, "unknown", "flaky"}} {
		var j map[string]any
		if err := json.Unmarshal([]byte(got[i]), &j); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, got[i])
		}
		if j["offset"] != want.offset || j["reason"] != want.reason || j["value"] != want.value {
			t.Errorf("json line %d: offset %v, reason %v, value %v; want %v %s %q", i, j["offset"], j["reason"], j["value"], want.offset, want.reason, want.value)
		}
	}

	if _, _, err := run("-partition", "5"); err == nil || !strings.Contains(err.Error(), "has no partition 5") {
		t.Fatalf("-partition 5 of a topic of one: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return lines(b.buf.Bytes())
}

// With -follow the command prints dead letters as they come, and stops
// without an error when interrupted.
func TestRunFollows(t *testing.T) {
	lcfg := startListener(t)
	cfg, _, err := dlq.Parse([]string{"-follow", "-offset", "0"}, env(map[string]string{"KAFKA_BROKERS": strings.Join(lcfg.Brokers, ",")}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	type result struct {
		sum dlq.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := dlq.Run(ctx, cfg, &out)
		done <- result{sum, err}
	}()
	produce(t, lcfg.Brokers, lcfg.Kafka.Topic, "host-0", "not json", "host-1", "fine", "host-2", "unknown host")
	deadline := time.Now().Add(20 * time.Second)
	for len(out.lines()) < 2 {
		select {
		case r := <-done:
			t.Fatalf("the command stopped while following: %+v, %v", r.sum, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("followed lines: %q, want 2", out.lines())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case r := <-done:
		if r.err != nil || r.sum != (dlq.Summary{Letters: 2}) {
			t.Fatalf("after the interrupt: %+v, %v", r.sum, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop when interrupted")
	}
	got := strings.Join(out.lines(), "\n") // records of different keys are dead-lettered in any order
	if !strings.Contains(got, `key="host-0" reason="malformed JSON"`) || !strings.Contains(got, `key="host-2" reason="permanent"`) {
		t.Fatalf("followed lines:\n%s", got)
	}
}

// oneTopicBroker starts an in-process broker (kfake) holding topic, in one
// partition, closed when the test ends.
func oneTopicBroker(t *testing.T, topic string) (*kfake.Cluster, []string) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster, cluster.ListenAddrs()
}

// A transaction's commit marker takes the topic's last offset and is never
// delivered: read up to the end it found at start, the command waited for
// it until interrupted. It must end once the broker says nothing
// deliverable is left, and not print a record written after its start.
func TestRunEndsBeforeATransactionMarkerAtTheEnd(t *testing.T) {
	_, brokers := oneTopicBroker(t, "dlq-txn")
	produce(t, brokers, "dlq-txn", "stray", "not an envelope") // offset 0
	pcfg := sarama.NewConfig()
	pcfg.Version = sarama.V3_6_0_0
	pcfg.Producer.Idempotent, pcfg.Producer.RequiredAcks, pcfg.Producer.Return.Successes = true, sarama.WaitForAll, true
	pcfg.Producer.Transaction.ID, pcfg.Net.MaxOpenRequests = "dlq-txn-producer", 1
	tp, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if err := tp.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.SendMessage(&sarama.ProducerMessage{Topic: "dlq-txn", Value: sarama.StringEncoder("in a transaction")}); err != nil {
		t.Fatal(err) // offset 1
	}
	if err := tp.CommitTxn(); err != nil {
		t.Fatal(err) // its marker: offset 2, the last
	}

	cfg, _, err := dlq.Parse([]string{"-kafka-dlq-topic", "dlq-txn"}, env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")}))
	if err != nil {
		t.Fatal(err)
	}
	// later, when not nil, is produced once the two records are printed.
	run := func(later func()) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var out syncBuffer
		done := make(chan error, 1)
		go func() { _, err := dlq.Run(ctx, cfg, &out); done <- err }()
		if later != nil {
			for deadline := time.Now().Add(10 * time.Second); len(out.lines()) < 2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("printed %q, want the 2 records", out.lines())
				}
			}
			later()
		}
		if err := <-done; ctx.Err() != nil || err != nil {
			t.Fatalf("the command ended with the interrupt (%v), error %v: it waited for the transaction marker", ctx.Err(), err)
		}
		return out.lines()
	}
	if got := run(nil); len(got) != 2 {
		t.Fatalf("lines %q, want the 2 records", got)
	}
	// A record written after the start, behind the marker, is past the end.
	got := run(func() { produce(t, brokers, "dlq-txn", "later", "written after the start") })
	if len(got) != 2 {
		t.Fatalf("lines %q, want the 2 records below the end found at the start", got)
	}
}

// After a leader change the new leader's high watermark can lag behind the
// end found at start: a fetch below the end answers no records, and the
// latest offset is the lagging one, until its followers' fetches move it on.
// The read waited 2 s, took the empty answer for "only markers left" and
// ended printing none of the 3 records below the end. It must wait for them.
func TestRunWaitsForALaggingLeaderBelowTheEnd(t *testing.T) {
	cluster, brokers := oneTopicBroker(t, "dlq-lag")
	produce(t, brokers, "dlq-lag", "a", "1", "b", "2", "c", "3")
	// For 4 s the leader lags at 0; the first latest offset asked (the end
	// found at start) is the real one, 3.
	lagUntil := time.Now().Add(4 * time.Second)
	lagging := func() bool { return time.Now().Before(lagUntil) }
	answerLatest(cluster, func(asked int32) bool { return asked > 1 && lagging() }, 0)
	cluster.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !lagging() {
			return nil, nil, false
		}
		r := req.(*kmsg.FetchRequest)
		time.Sleep(time.Duration(r.MaxWaitMillis) * time.Millisecond) // a broker waits for data that long
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p.Partition, 0, 0, 0
				rp.RecordBatches = []byte{} // no records (not null, as a broker sends them)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	if got := readToEnd(t, brokers, "dlq-lag"); len(got) != 3 {
		t.Fatalf("lines %q, want the 3 records below the end found at start", got)
	}
}

// answerLatest answers a request for partition 0's latest offset with
// offset when answer says so, given how many such requests have come (this
// one included); the cluster answers the others.
func answerLatest(cluster *kfake.Cluster, answer func(asked int32) bool, offset int64) {
	var asked atomic.Int32
	cluster.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if r.Topics[0].Partitions[0].Timestamp != -1 || !answer(asked.Add(1)) {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = r.Topics[0].Topic
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Partition, rp.Offset, rp.Timestamp = 0, offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}

// readToEnd runs the command on topic, not following, and returns the lines
// it printed; it fails the test if the command ends in an error or is still
// reading after 15 s.
func readToEnd(t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	cfg, _, err := dlq.Parse([]string{"-kafka-dlq-topic", topic}, env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out syncBuffer
	if _, err := dlq.Run(ctx, cfg, &out); err != nil || ctx.Err() != nil {
		t.Fatalf("the command ended with error %v, interrupt %v", err, ctx.Err())
	}
	return out.lines()
}

// An unclean election can truncate the log below the end found at start:
// here the end was 5, and the log now ends at 3 (the leader's answer to a
// fetch at 5 is out of range). The 3 records left are all there is; the read
// must end after them, not wait for offsets 3-4 until interrupted.
func TestRunEndsAtALogTruncatedBelowTheEnd(t *testing.T) {
	cluster, brokers := oneTopicBroker(t, "dlq-truncated")
	produce(t, brokers, "dlq-truncated", "a", "1", "b", "2", "c", "3")
	// The first latest offset asked (the end found at start) is the old
	// leader's, 5; every later one is the log's, 3.
	answerLatest(cluster, func(asked int32) bool { return asked == 1 }, 5)
	if got := readToEnd(t, brokers, "dlq-truncated"); len(got) != 3 {
		t.Fatalf("lines %q, want the 3 records the log holds", got)
	}
}

// parseListener parses a listener's settings as the proving ground's build
// does: with the simulated handler and the embedded broker.
func parseListener(args []string, lookup func(string) (string, bool)) (*listener.Config, *settings.Set, error) {
	return listener.Parse(args, lookup, simulated.Extension(&simulated.Knobs{}), embedded.Extension())
}

// Anyone who can write to the dead-letter topic (or to the source topic,
// whose keys, values and quoted errors the envelopes carry) chooses what
// the command prints. An envelope whose every field holds CSI (U+009B) and
// OSC (U+009D) sequences, ESC, a newline and bidi overrides and isolates is
// printed, in each mode, with none of them raw: a person reading the
// output in a terminal sees the escapes, and a JSON reader reads back the
// envelope's strings.
func TestRunEscapesAForgedEnvelope(t *testing.T) {
	_, brokers := oneTopicBroker(t, "dlq-forged")
	const (
		csi    = "\u009b2J\u009b31m"             // clear the screen, then red
		osc    = "\u009d0;owned\u009c"           // set the window title
		escape = "\x1b[1A\x1b[2K"                // up a line, erase it
		bidi   = "\u202eevil\u202c\u2066x\u2069" // right-to-left override, isolate
	)
	l := &messages.DeadLetter{
		OriginalTopic: "events" + csi + " key=\"fine\"\n" + bidi, OriginalPartition: 1, OriginalOffset: 5,
		Key: []byte("host" + osc + bidi), Value: []byte(`{"v":"` + escape + csi + `"}`),
		Headers: []*messages.Header{{Key: []byte("h" + csi), Value: []byte(osc + bidi)}},
		Error:   "decode event: " + csi + osc + escape + bidi, ErrorClass: messages.ErrorClass_ERROR_CLASS_PERMANENT, Attempts: 1,
		LastFailureTime: timestamppb.Now(), ConsumerGroup: "group" + osc, MemberId: "member" + bidi, Reason: "reason" + csi,
		History: []*messages.FailedAttempt{{Attempt: 1, Error: "history " + osc + bidi, Dependency: "vmaas" + csi, Time: timestamppb.Now()}},
	}
	value, err := proto.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := sarama.NewConfig()
	pcfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "dlq-forged", Key: sarama.ByteEncoder(l.GetKey()), Value: sarama.ByteEncoder(value),
		Headers: []sarama.RecordHeader{{Key: []byte("h" + csi), Value: []byte(osc + bidi)}}}); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{nil, {"-value"}, {"-json"}, {"-json", "-value"}} {
		cfg, _, err := dlq.Parse(append([]string{"-kafka-dlq-topic", "dlq-forged"}, args...), env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var out bytes.Buffer
		sum, err := dlq.Run(ctx, cfg, &out)
		cancel()
		if err != nil || sum != (dlq.Summary{Letters: 1}) {
			t.Fatalf("%v: summary %+v, error %v", args, sum, err)
		}
		printed := out.String()
		if !strings.HasSuffix(printed, "\n") || strings.Count(printed, "\n") != 1 {
			t.Fatalf("%v: want one line:\n%q", args, printed)
		}
		for _, r := range strings.TrimSuffix(printed, "\n") {
			if safetext.Escapes(r) {
				t.Errorf("%v: the output holds %U raw:\n%q", args, r, printed)
				break
			}
		}
		if !cfg.JSON {
			if want := ` "events\u009b2J\u009b31m key=\"fine\"\n\u202eevil\u202c\u2066x\u2069"/1/5 key="host\u009d0;owned\u009c`; !strings.Contains(printed, want) {
				t.Errorf("%v: the line does not show the topic quoted and the key escaped (%s):\n%s", args, want, printed)
			}
			continue
		}
		var j struct {
			Topic, Key, Error, Reason, Value string
			ConsumerGroup                    string `json:"consumer_group"`
			MemberID                         string `json:"member_id"`
			History                          []struct{ Error, Dependency string }
		}
		if err := json.Unmarshal(out.Bytes(), &j); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, printed)
		}
		if j.Topic != l.GetOriginalTopic() || j.Key != string(l.GetKey()) || j.Error != l.GetError() || j.Reason != l.GetReason() ||
			j.ConsumerGroup != l.GetConsumerGroup() || j.MemberID != l.GetMemberId() || len(j.History) != 1 ||
			j.History[0].Error != l.GetHistory()[0].GetError() || j.History[0].Dependency != l.GetHistory()[0].GetDependency() ||
			cfg.Value && j.Value != string(l.GetValue()) {
			t.Errorf("%v: the JSON does not read back as the envelope:\n%s", args, printed)
		}
	}
}
