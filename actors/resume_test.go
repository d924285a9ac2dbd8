package actors_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// earlierOwner returns what an earlier owner of a partition committed
// after admitting first..last and finishing finished.
func earlierOwner(t *testing.T, first, last int64, finished ...int64) ledger.Resume {
	t.Helper()
	l := ledger.New(8)
	for o := first; o <= last; o++ {
		if err := l.Admit(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range finished {
		if _, err := l.Finish(o); err != nil {
			t.Fatal(err)
		}
	}
	_, meta, _ := l.Commit(actors.DefaultCommitMetadataMaxBytes)
	r, err := ledger.DecodeMetadata(meta)
	if err != nil {
		t.Fatalf("decode %q: %v", meta, err)
	}
	return r
}

// A record the earlier owner finished is finished as it is admitted,
// without running; the commit metadata keeps speaking of the ones not yet
// admitted again, so a second crash would not replay them either.
func TestPartitionFinishesWhatTheEarlierOwnerFinished(t *testing.T) {
	resume := earlierOwner(t, 10, 15, 12, 13, 15) // 10, 11 and 14 unfinished
	earlier := map[int64]bool{12: true, 13: true, 15: true}
	h := newScriptedHandler()
	var mu sync.Mutex
	var admitted []int64
	marker := newCheckingMarker(t, func(o int64) bool { return earlier[o] || h.isFinished(o) },
		func() []int64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(admitted) })
	system := newTestSystem(t)
	stats := &actors.Stats{}
	var released atomic.Int64
	a := actors.NewPartitionActor(actors.PartitionConfig{Topic: "events", Partition: 3, Epoch: 1, Settings: testSettings(ordering.ByKey),
		Handler: h, DeadLetters: newScriptedDeadLetters(0, false), Marker: marker, Stats: stats, Resume: &resume,
		Logger: discardLogger(), Release: func(n int, _ int64) { released.Add(int64(n)) }})
	pid := system.Root.Spawn(a.Props())
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	admit := func(o int64) {
		mu.Lock()
		admitted = append(admitted, o)
		mu.Unlock()
		system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 3, Offset: o, Key: []byte("k")}})
	}

	admit(10)
	admit(11)
	if c := expectCall(t, h); c.offset != 10 {
		t.Fatalf("first call for %d, want 10", c.offset)
	}
	h.answer(10, ok)
	if c := expectCall(t, h); c.offset != 11 {
		t.Fatalf("second call for %d, want 11", c.offset)
	}
	// 12-15 are not admitted yet: the commit must still carry 12, 13, 15.
	marker.expectFinishedAbove(t, 12, 13, 15)

	for o := int64(12); o <= 17; o++ {
		admit(o)
	}
	h.answer(11, ok)
	// One key, so records run one at a time, in order: 14, then 16, 17.
	for _, want := range []int64{14, 16, 17} {
		if c := expectCall(t, h); c.offset != want {
			t.Fatalf("call for %d, want %d (12, 13 and 15 were finished before)", c.offset, want)
		}
		h.answer(want, ok)
	}
	waitFor(t, "the mark past 17", func() bool { return marker.committed() == 18 })
	select {
	case c := <-h.calls:
		t.Fatalf("offset %d ran although the earlier owner finished it", c.offset)
	default:
	}
	if s := stats.Snapshot(); s.Resumed != 3 || s.Succeeded != 5 || s.InFlight != 0 {
		t.Fatalf("stats %+v; want 3 resumed, 5 succeeded", s)
	}
	if got := released.Load(); got != 8 {
		t.Fatalf("%d credits given back for 8 records", got)
	}
}

// committedReader is the listener's reader of committed offsets, on a
// client of its own.
func committedReader(t *testing.T, k actors.KafkaSettings) actors.CommittedReader {
	t.Helper()
	cfg, err := actors.NewConsumerConfig(k, testSettings(ordering.Unordered))
	if err != nil {
		t.Fatal(err)
	}
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return actors.NewCommittedReader(client, k.Group)
}

// callLog counts handler calls per offset; offset 0 waits for its context
// while pin is set.
type callLog struct {
	mu    sync.Mutex
	calls map[int64]int
	pin   bool
}

func (c *callLog) Handle(ctx context.Context, r *messages.Record) error {
	c.mu.Lock()
	c.calls[r.GetOffset()]++
	pin := c.pin && r.GetOffset() == 0
	c.mu.Unlock()
	if pin {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (c *callLog) count() (offsets, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		offsets++
		calls += n
	}
	return offsets, calls
}

// On a real protocol (kfake here, Apache Kafka in make test-kafka): one
// record pins the partition while the rest finish; the member stops, its
// drain abandons the pinned record and commits offset 0 with metadata. The
// next member reads that metadata and runs the pinned record alone.
func TestResumeAfterHandoverOnKafka(t *testing.T) {
	_, k := newKfake(t, "events", "resume", 1)
	resumeAfterHandover(t, k)
}

// The same on Apache Kafka, when PATCHFLOW_KAFKA_BROKERS names a broker.
func TestRealBrokerResumeAfterHandover(t *testing.T) {
	brokers := os.Getenv("PATCHFLOW_KAFKA_BROKERS")
	if brokers == "" {
		t.Skip("PATCHFLOW_KAFKA_BROKERS is not set (make test-kafka runs this against a real broker)")
	}
	version, err := sarama.ParseKafkaVersion(os.Getenv("PATCHFLOW_KAFKA_VERSION"))
	if err != nil {
		version = sarama.V3_6_0_0
	}
	name := fmt.Sprintf("resume-%d", time.Now().UnixNano())
	k := actors.KafkaSettings{Brokers: strings.Split(brokers, ","), Topic: name, Group: name, Version: version,
		Assignor: "cooperative-sticky", SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond}
	admin, err := sarama.NewClusterAdmin(k.Brokers, saramaConfig(version))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	waitForLeader(t, admin, name)
	resumeAfterHandover(t, k)
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	return cfg
}

func resumeAfterHandover(t *testing.T, k actors.KafkaSettings) {
	const n = 300
	producer, err := sarama.NewSyncProducer(k.Brokers, saramaConfig(k.Version))
	if err != nil {
		t.Fatal(err)
	}
	var batch []*sarama.ProducerMessage
	for i := range n {
		batch = append(batch, &sarama.ProducerMessage{Topic: k.Topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%d", i)), Value: sarama.StringEncoder("v")})
	}
	if err := producer.SendMessages(batch); err != nil {
		t.Fatal(err)
	}
	_ = producer.Close()

	s := testSettings(ordering.ByKey)
	s.DrainTimeout = 500 * time.Millisecond
	reader := committedReader(t, k)
	newBridge := func(h actors.Handler) *actors.Bridge {
		b, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h, Committed: reader,
			Logger:      slog.New(slog.NewTextHandler(&tWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	first := &callLog{calls: map[int64]int{}, pin: true}
	b1 := newBridge(first)
	stop := runMember(t, k, s, b1, nil)
	waitFor2(t, "every record but the pinned one handled", 30*time.Second, func() bool {
		offsets, _ := first.count()
		return offsets == n
	})
	stop()
	checkCredits(t, b1)
	c, err := reader(context.Background(), k.Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ledger.DecodeMetadata(c.Metadata)
	if err != nil || c.Offset != 0 || r.Base != 0 || r.End != n || r.Unfinished() != 1 || c.End != n {
		t.Fatalf("committed %+v (%+v, %v); want 0, speaking of 1-%d finished, the partition ending at %d", c, r, err, n-1, n)
	}
	// pf3:0:300:1,299:1:<lead>:<tail>:key.ru:<crc>: 51 bytes, the records
	// at 1 and 299 fingerprinted.
	if len(c.Metadata) > 51 || r.First != 1 || r.Lead == 0 || r.Tail == 0 {
		t.Fatalf("metadata of %d bytes for one unfinished record: %q; want 51 naming 1 and 299", len(c.Metadata), c.Metadata)
	}

	second := &callLog{calls: map[int64]int{}}
	b2 := newBridge(second)
	stop = runMember(t, k, s, b2, nil)
	waitFor2(t, "the partition committed to its end", 30*time.Second, func() bool {
		c, err := reader(context.Background(), k.Topic, 0)
		return err == nil && c.Offset == n
	})
	stop()
	checkCredits(t, b2)
	second.mu.Lock()
	defer second.mu.Unlock()
	if len(second.calls) != 1 || second.calls[0] != 1 {
		t.Fatalf("the second member ran %v; want offset 0 alone, once", second.calls)
	}
	if got := b2.Stats().Snapshot().Resumed; got != n-1 {
		t.Fatalf("the second member resumed %d records, want %d", got, n-1)
	}
}

// Metadata the listener did not write, written for another offset or under
// another reading, naming no fingerprint, or speaking of records the log no
// longer holds, is ignored: the claim replays everything above the
// committed offset.
func TestResumeIgnoresForeignMetadata(t *testing.T) {
	mine := earlierOwner(t, 5, 9, 6, 7, 8, 9)
	record := func(o int64, value string) *messages.Record {
		return &messages.Record{Topic: "events", Offset: o, Key: []byte(fmt.Sprintf("host-%d", o)), Value: []byte(value)}
	}
	l := ledger.New(8)
	_ = l.SetReading("key.rc")
	for o := int64(5); o <= 9; o++ {
		_ = l.Admit(o)
	}
	for o := int64(6); o <= 9; o++ {
		_, _ = l.FinishRecord(o, actors.Fingerprint(record(o, "v1")))
	}
	_, meta, _ := l.Commit(4096)
	at6, at9 := record(6, "v1"), record(9, "v1")
	if want := fmt.Sprintf("pf3:5:5:1,4:6:%08x:%08x:key.rc:", actors.Fingerprint(at6), actors.Fingerprint(at9)); !strings.HasPrefix(meta, want) {
		t.Fatalf("the metadata the cases start from is %q, not %q...", meta, want)
	}
	// The checksum's last digit changed (to 0, or from 0 to 1: "damage" that
	// wrote the digit already there would be none).
	damaged := meta[:len(meta)-1] + "0"
	if damaged == meta {
		damaged = meta[:len(meta)-1] + "1"
	}
	checksummed := func(body string) string {
		return fmt.Sprintf("%s:%08x", body, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
	}
	noLead := checksummed(fmt.Sprintf("pf3:5:5:1,4:9:00000000:%08x:key.rc", actors.Fingerprint(at9)))
	noTail := checksummed(fmt.Sprintf("pf3:5:5:1,4:6:%08x:00000000:key.rc", actors.Fingerprint(at6)))
	version2 := checksummed(fmt.Sprintf("pf2:5:5:1,4:%08x:key.rc", actors.Fingerprint(at9)))
	rewritten9, rewritten6 := record(9, "v2"), record(6, "v2")
	headed9 := record(9, "v1")
	headed9.Headers = []*messages.Header{{Key: []byte("trace"), Value: []byte("t-2")}}
	at7, at8 := record(7, "v1"), record(8, "v1")
	for _, tc := range []struct {
		name               string
		initial, committed int64
		metadata           string
		end                int64
		last, first        *messages.Record
		reading            string
		want               bool
		why                string
	}{
		{"ours", 5, 5, meta, 10, at9, at6, "key.rc", true, ""},
		{"ours, the partition grown since", 5, 5, meta, 5000, at9, at6, "key.rc", true, ""},
		{"none", 5, 5, "", 10, at9, at6, "key.rc", false, ""},
		{"another client's", 5, 5, "{\"consumer\":\"x\"}", 10, at9, at6, "key.rc", false, "not in a format of this consumer"},
		{"version 1", 5, 5, "pf1:5:5:1,4:0d2c1f5b", 10, at9, at6, "key.rc", false, "version 1"},
		{"version 2, one record named", 5, 5, version2, 10, at9, at6, "key.rc", false, "version 2"},
		{"damaged", 5, 5, damaged, 10, at9, at6, "key.rc", false, "checksum"},
		{"left behind by another client's commit", 7, 7, meta, 10, at9, at6, "key.rc", false, "not of the committed offset 7"},
		{"claim began elsewhere", 0, 5, meta, 10, at9, at6, "key.rc", false, "the claim began at 0"},
		{"past the partition's end (a truncated log)", 5, 5, meta, 9, at9, at6, "key.rc", false, "past the partition's end 9"},
		{"no lead (00000000)", 5, 5, noLead, 10, at9, at9, "key.rc", false, "names no fingerprint"},
		{"no tail (00000000)", 5, 5, noTail, 10, at9, at6, "key.rc", false, "names no fingerprint"},
		{"the log truncated and written again", 5, 5, meta, 12, rewritten9, at6, "key.rc", false, "the record at 9 is not the one the commit metadata names"},
		{"the last record's headers other", 5, 5, meta, 12, headed9, at6, "key.rc", false, "the record at 9 is not the one the commit metadata names"},
		{"written again but for the last record", 5, 5, meta, 12, at9, rewritten6, "key.rc", false, "the record at 6 is not the one the commit metadata names"},
		{"no record at its last offset", 5, 5, meta, 10, nil, at6, "key.rc", false, "holds no record at 9"},
		{"a record of another offset", 5, 5, meta, 10, at8, at6, "key.rc", false, "holds no record at 9"},
		{"no record at its first", 5, 5, meta, 10, at9, nil, "key.rc", false, "holds no record at 6"},
		{"a record of another offset as its first", 5, 5, meta, 10, at9, at7, "key.rc", false, "holds no record at 6"},
		{"another isolation level", 5, 5, meta, 10, at9, at6, "key.ru", false, "written reading \"key.rc\""},
		{"another ordering", 5, 5, meta, 10, at9, at6, "unordered.rc", false, "this consumer reads \"unordered.rc\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, why := actors.ResumeOf(tc.initial, tc.reading, actors.Committed{Offset: tc.committed, Metadata: tc.metadata, End: tc.end, Last: tc.last, First: tc.first})
			if (r != nil) != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("resumeOf = %v, %q; want resume %v, why containing %q", r, why, tc.want, tc.why)
			}
			if r != nil && r.FinishedCount() != mine.FinishedCount() {
				t.Fatalf("resume finishes %d, want %d", r.FinishedCount(), mine.FinishedCount())
			}
		})
	}
}
