package actors_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// bombBatch sends values to partition of k's topic as one zstd batch (one
// request, one batch), and returns the offset of its first record.
func bombBatch(t *testing.T, k actors.KafkaSettings, partition int32, values ...[]byte) int64 {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Compression = sarama.CompressionZSTD
	cfg.Producer.MaxMessageBytes = int(sarama.MaxRequestSize) - 1 // sarama counts before compressing
	cfg.Producer.Flush.Messages = len(values)                     // sent once all are in, as one batch
	cfg.Producer.Flush.Frequency = 5 * time.Second
	producer, err := sarama.NewSyncProducer(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	msgs := make([]*sarama.ProducerMessage, len(values))
	for i, v := range values {
		msgs[i] = &sarama.ProducerMessage{Topic: k.Topic, Partition: partition, Value: sarama.ByteEncoder(v)}
	}
	if err := producer.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	first := msgs[0].Offset
	for i, m := range msgs {
		if m.Offset != first+int64(i) {
			t.Fatalf("the batch's records are at %d, not in one run from %d", m.Offset, first)
		}
	}
	return first
}

// goodRecord sends one small record (its own batch) to partition and
// returns its offset.
func goodRecord(t *testing.T, k actors.KafkaSettings, partition int32, value string) int64 {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Compression = sarama.CompressionZSTD
	producer, err := sarama.NewSyncProducer(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	_, offset, err := producer.SendMessage(&sarama.ProducerMessage{Topic: k.Topic, Partition: partition, Key: sarama.StringEncoder(value), Value: sarama.StringEncoder(value)})
	if err != nil {
		t.Fatal(err)
	}
	return offset
}

// heapPeak samples the heap in use until stop is called, and returns the
// highest it saw: a coarse bound, enough to tell a batch decoded whole.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

// A compression bomb (values of zeros that zstd shrinks to a few hundred
// bytes) between good records of a partition, and a second one after a
// good record wedged between them, on a broker that also leads a second
// partition: with the decompression limit set, no batch is decoded past
// it, the good records of both partitions are all handled (those before
// the bomb came in the fetch that failed), every offset of the bombs is
// dead-lettered by itself (no key, no value, the reason and the limit
// said), and the committed offset passes them. Unbounded (as before), the
// bomb's values were decoded whole into the heap.
func TestCompressionBombIsDeadLetteredByOffsetAndThePartitionGoesOn(t *testing.T) {
	const (
		limit    = 256 << 10
		bombSize = 8 << 20 // four of them in one batch: 32 MiB decompressed, about 4 KB on the broker
	)
	old := sarama.MaxDecompressedBatchSize
	sarama.MaxDecompressedBatchSize = limit
	t.Cleanup(func() { sarama.MaxDecompressedBatchSize = old })

	_, k := newKfake(t, "bombs", "bombs-group", 2)
	want := map[int32][]int64{} // good offsets, by partition
	bombs := map[int64]bool{}   // unreadable offsets of partition 0
	for i := range 3 {
		want[0] = append(want[0], goodRecord(t, k, 0, fmt.Sprintf("before-%d", i)))
	}
	zeros := make([]byte, bombSize)
	first := bombBatch(t, k, 0, zeros, zeros, zeros, zeros)
	for o := first; o < first+4; o++ {
		bombs[o] = true
	}
	want[0] = append(want[0], goodRecord(t, k, 0, "wedged"))
	bombs[bombBatch(t, k, 0, zeros[:4<<20])] = true // one zstd frame of 4 MiB: refused by its declared size
	for i := range 2 {
		want[0] = append(want[0], goodRecord(t, k, 0, fmt.Sprintf("after-%d", i)))
	}
	for i := range 10 {
		want[1] = append(want[1], goodRecord(t, k, 1, fmt.Sprintf("other-%d", i)))
	}
	zeros = nil
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	var mu sync.Mutex
	handled := map[int32][]int64{}
	var letters []*messages.DeadLetter
	h := actors.HandlerFunc(func(_ context.Context, r *messages.Record) error {
		if len(r.GetValue()) > limit {
			t.Errorf("the handler got a record of %d bytes at %d/%d, past the limit of %d", len(r.GetValue()), r.GetPartition(), r.GetOffset(), limit)
		}
		mu.Lock()
		defer mu.Unlock()
		handled[r.GetPartition()] = append(handled[r.GetPartition()], r.GetOffset())
		return nil
	})
	s := testSettings(ordering.ByKey)
	cfg, err := actors.NewConsumerConfig(k, s)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = probe.Close() })
	logs := &syncBuffer{}
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, &tWriter{t: t}), nil)),
		DeadLetters: actors.DeadLetterFunc(func(_ context.Context, l *messages.DeadLetter) error {
			mu.Lock()
			defer mu.Unlock()
			letters = append(letters, l)
			return nil
		}),
		Unreadable: &actors.UnreadableConfig{Read: actors.NewPartitionReader(probe), Window: cfg.Consumer.Fetch.Default, Limit: limit}})
	if err != nil {
		t.Fatal(err)
	}
	peak := heapPeak()
	start := time.Now()
	stop := runMember(t, k, s, bridge, nil)
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled[0]) == len(want[0]) && len(handled[1]) == len(want[1]) && len(letters) == len(bombs)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	var committed map[int32]int64
	ends := map[int32]int64{0: want[0][len(want[0])-1] + 1, 1: want[1][len(want[1])-1] + 1}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if committed = committedOffsets(t, k.Brokers, k.Group, k.Topic); committed[0] == ends[0] && committed[1] == ends[1] {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	used := int64(peak()) - int64(base.HeapAlloc)
	t.Logf("all handled and dead-lettered in %v; heap peak %.1f MiB over the %.1f MiB before", took.Round(time.Millisecond),
		float64(used)/(1<<20), float64(base.HeapAlloc)/(1<<20))

	mu.Lock()
	defer mu.Unlock()
	for p, offs := range want {
		got := slices.Sorted(slices.Values(handled[p]))
		if !slices.Equal(got, offs) {
			t.Errorf("partition %d: handled %v, want %v", p, got, offs)
		}
	}
	var lettered []int64
	for _, l := range letters {
		lettered = append(lettered, l.GetOriginalOffset())
		if l.GetOriginalPartition() != 0 || l.GetReason() != string(messages.ReasonUnreadableBatch) || l.GetKey() != nil || l.GetValue() != nil ||
			!strings.Contains(l.GetError(), fmt.Sprint(limit)) {
			t.Errorf("dead letter of an unreadable offset: partition %d, reason %q, key %q, %d bytes of value, error %q; want partition 0, %q, no key or value, the limit named",
				l.GetOriginalPartition(), l.GetReason(), l.GetKey(), len(l.GetValue()), l.GetError(), messages.ReasonUnreadableBatch)
		}
	}
	slices.Sort(lettered)
	if wantLettered := slices.Sorted(func(yield func(int64) bool) {
		for o := range bombs {
			if !yield(o) {
				return
			}
		}
	}); !slices.Equal(lettered, wantLettered) {
		t.Errorf("dead-lettered offsets %v, want the bombs' %v", lettered, wantLettered)
	}
	if committed[0] != ends[0] || committed[1] != ends[1] {
		t.Errorf("committed %v, want %v: past the bombs", committed, ends)
	}
	// The bombs are 32 MiB and 4 MiB decompressed; within the limit the
	// decoding holds a few times 256 KiB at most.
	if used > 16<<20 {
		t.Errorf("heap grew by %.1f MiB while consuming: a bomb was decoded past the limit", float64(used)/(1<<20))
	}
	if line := logs.line("record batch over the decompression limit: no fetch can read these offsets; each is dead-lettered without key or value, and the partition goes on past them"); !strings.Contains(line, "first_offset=3") || !strings.Contains(line, fmt.Sprintf("limit=%d", limit)) {
		t.Errorf("no error line naming the offsets and the limit: %q", line)
	}
}
