package demo

import (
	"context"
	crand "crypto/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/loadgen"
)

// A ratio below 1 is said as "slower", with the inverse ratio; never as
// "0.9x faster".
func TestRatioWords(t *testing.T) {
	for _, c := range []struct {
		pipeline, sequential float64
		want                 string
	}{
		{200, 20, "the pipeline 10.0x faster"},
		{18, 20, "the pipeline 1.1x slower"},
		{10, 20, "the pipeline 2.0x slower"},
		{20, 20, "the pipeline as fast, within 5% (ratio 1.00)"},
		{20.5, 20, "the pipeline as fast, within 5% (ratio 1.02)"},
	} {
		got := ratioWords(c.pipeline, c.sequential)
		if got != c.want {
			t.Errorf("ratioWords(%v, %v) = %q, want %q", c.pipeline, c.sequential, got, c.want)
		}
		if c.pipeline < c.sequential && strings.Contains(got, "faster") {
			t.Errorf("ratioWords(%v, %v) = %q: a slower pipeline said faster", c.pipeline, c.sequential, got)
		}
	}
}

// The gate never lets the producer more than its limit ahead of the
// committed count, and holds it there until the count moves.
func TestLeadGateBoundsTheLead(t *testing.T) {
	const limit, messages = 5, 200
	var committed atomic.Int64
	g := &leadGate{limit: limit, committed: committed.Load}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// At the limit, the next message waits.
	for i := 0; i < limit; i++ {
		if err := g.wait(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	held := make(chan error, 1)
	go func() { held <- g.wait(ctx, limit) }()
	select {
	case err := <-held:
		t.Fatalf("message %d went with %d committed and a limit of %d (err %v)", limit, committed.Load(), limit, err)
	case <-time.After(100 * time.Millisecond):
	}
	committed.Store(1)
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	// A consumer that commits in random-sized steps behind the producer:
	// after every send, sent - committed stays within the limit.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for committed.Load() < messages {
			time.Sleep(time.Millisecond)
			if c := committed.Load(); c < g.sent.Load() {
				committed.Store(min(g.sent.Load(), c+int64(1+c%3)))
			}
		}
	}()
	for i := limit + 1; i < messages; i++ {
		if err := g.wait(ctx, i); err != nil {
			t.Fatal(err)
		}
		if lead := g.sent.Load() - committed.Load(); lead > limit {
			t.Fatalf("after message %d: %d ahead, limit %d", i, lead, limit)
		}
	}
	<-done
	if m := g.maxLead.Load(); m > limit || m < 1 {
		t.Fatalf("largest lead %d, limit %d", m, limit)
	}
}

// The comparison's streams mention no host the main stream or the other
// comparison stream mentions, bad and skipped hosts included.
func TestCompareStreamsHaveHostsOfTheirOwn(t *testing.T) {
	opts := DefaultOptions()
	pl, sl := compareLoads(opts)
	if pl.Events != opts.CompareEvents || sl.Events != opts.CompareEvents || pl.Hosts != sl.Hosts || pl.Shape != opts.Load.Shape || pl.BadShare != opts.Load.BadShare {
		t.Fatalf("comparison streams differ from each other or from the main stream's shape: %+v %+v", pl, sl)
	}
	owner := map[string]string{}
	fl := fixedLoad(opts)
	if fl.Events != pl.Events || fl.Hosts != pl.Hosts || fl.Shape != pl.Shape {
		t.Fatalf("the fixed-limit stream differs from the pipeline's: %+v %+v", fl, pl)
	}
	for name, o := range map[string]loadgen.Options{"main": opts.Load, "pipeline": pl, "sequential": sl, "fixed": fl} {
		plan := loadgen.NewPlan(o)
		for _, item := range plan.Items {
			host := item.Key
			if other, ok := owner[host]; ok && other != name {
				t.Fatalf("host %s in the %s stream and the %s stream", host, other, name)
			}
			owner[host] = name
		}
	}
}

// The comparison's streams are produced up front, so with the defaults
// they must fit in the lead, or make demo fails after its main run.
func TestDefaultComparisonFitsTheLead(t *testing.T) {
	opts := DefaultOptions()
	pl, sl := compareLoads(opts)
	for _, o := range []loadgen.Options{pl, sl} {
		if n := len(loadgen.NewPlan(o).Items); n > opts.Lead {
			t.Fatalf("a comparison stream of %d messages, lead %d", n, opts.Lead)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tdemo\nVmPeak:\t 5000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n"
	got, err := parseVmHWM(strings.NewReader(status))
	if err != nil || got != 123456*1024 {
		t.Fatalf("parseVmHWM = %d, %v", got, err)
	}
	if _, err := parseVmHWM(strings.NewReader("VmRSS:\t 1000 kB\n")); err == nil {
		t.Fatal("no VmHWM line, no error")
	}
	if peak, err := PeakRSS(); err != nil || peak <= 0 {
		t.Fatalf("PeakRSS = %d, %v", peak, err)
	}
}

// What the group committed is deleted from the in-process broker, and the
// broker's memory is freed with it: the demo's topics get segments small
// enough to be dropped whole (kfake's default of 100 MiB per partition
// keeps everything a demo produces).
func TestTrimmerFreesTheBrokersMemory(t *testing.T) {
	const topic, group, records, size = "trim-test", "trim-test-group", 400, 100 << 10
	cluster, err := embedded.Start(1, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.Addrs()
	trim, err := newTrimmer(brokers, sarama.V3_6_0_0, topic, group, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer trim.close()

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.MaxMessageBytes = 1 << 20
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	value := make([]byte, size)
	for i := 0; i < records; i++ {
		_, _ = crand.Read(value) // incompressible, as the broker stores it
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(value)}); err != nil {
			t.Fatal(err)
		}
	}
	full := heapAlloc()

	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// A simple commit (no generation), as a group's member would commit.
	coordinator, err := client.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	commit := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: group, ConsumerGroupGeneration: sarama.GroupGenerationUndefined, RetentionTime: -1}
	commit.AddBlock(topic, 0, records-10, 0, "")
	resp, err := coordinator.CommitOffset(commit)
	if err != nil {
		t.Fatal(err)
	}
	if kerr := resp.Errors[topic][0]; kerr != sarama.ErrNoError {
		t.Fatal(kerr)
	}
	if err := trim.trim(); err != nil {
		t.Fatal(err)
	}
	if c := trim.committed.Load(); c != records-10 {
		t.Fatalf("trimmer read %d committed, want %d", c, records-10)
	}
	if held := trim.maxHeld.Load(); held != records {
		t.Fatalf("trimmer saw %d records held before deleting, want %d", held, records)
	}
	if err := trim.trim(); err != nil {
		t.Fatal(err)
	}
	if held := trim.maxHeld.Load(); held != records {
		t.Fatalf("largest count held %d, want %d", held, records)
	}
	start, err := client.GetOffset(topic, 0, sarama.OffsetOldest)
	if err != nil || start != records-10 {
		t.Fatalf("log start offset %d (%v), want %d", start, err, records-10)
	}
	after := heapAlloc()
	if freed := full - after; freed < records*size/2 {
		t.Fatalf("heap %d MiB with %d records of %d KiB, %d MiB after deleting all but 10: freed %d MiB, want at least half",
			full>>20, records, size>>10, after>>20, (full-after)>>20)
	}
}

func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
