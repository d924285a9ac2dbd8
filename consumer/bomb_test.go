package consumer

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/offsets"
)

// --- a compression bomb ------------------------------------------------

func TestListenerDeadLettersACompressionBombByOffset(t *testing.T) {
	checkCompressionBomb(t, kfakeBroker(t, nil), "3.6.0")
}

func TestRealBrokerListenerDeadLettersACompressionBombByOffset(t *testing.T) {
	brokers, version := realBroker(t)
	checkCompressionBomb(t, brokers, version)
}

// checkCompressionBomb writes, between good records, a compression bomb:
// four values of 16 MiB of zeros in one zstd batch, 64 MiB decompressed
// and about 7 KB on the broker (the attack measured 4 × 90 MiB in 40 KB,
// 1.2 GiB of heap). With the default configuration the consumer must
// never hold the bomb decoded: its heap stays within a few times the
// decompression limit (8 MiB), its four offsets are dead-lettered by
// offset (the reason said, no key, no value), the good records are all
// handled, and the committed offset passes the bomb. Unbounded, the
// bomb's values reached the handler, and the heap held them all.
func checkCompressionBomb(t *testing.T, brokers []string, version string) {
	const (
		bombValue  = 16 << 20
		limit      = 8 << 20 // the default MaxDecompressedBatchBytes
		heapBound  = 5 * limit
		unreadable = "batch over the decompression limit"
	)
	admin := testAdmin(t, brokers, version)
	topic := uniqueName("bomb")
	createTopic(t, admin, topic, 1, 1<<20)
	send := func(values ...[]byte) []int64 {
		cfg := sarama.NewConfig()
		cfg.Version = mustVersion(t, version)
		cfg.Producer.Return.Successes = true
		cfg.Producer.Compression = sarama.CompressionZSTD
		cfg.Producer.MaxMessageBytes = int(sarama.MaxRequestSize) - 1 // sarama counts before compressing
		cfg.Producer.Flush.Messages = len(values)                     // one batch
		cfg.Producer.Flush.Frequency = 5 * time.Second
		producer, err := sarama.NewSyncProducer(brokers, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		msgs := make([]*sarama.ProducerMessage, len(values))
		for i, v := range values {
			msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("host-1"), Value: sarama.ByteEncoder(v)}
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
	var good []int64
	for i := range 3 {
		good = append(good, send(fmt.Appendf(nil, "before-%d", i))...)
	}
	zeros := make([]byte, bombValue)
	bomb := send(zeros, zeros, zeros, zeros)
	for i := range 2 {
		good = append(good, send(fmt.Appendf(nil, "after-%d", i))...)
	}
	zeros = nil
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	sampled, stopSampling := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	var mu sync.Mutex
	var handled []int64
	group := uniqueName("bomb")
	cfg := testConfig(brokers, version, topic, group)
	run := start(t, cfg, HandlerFunc(func(_ context.Context, r *Record) error {
		if len(r.Value) > limit {
			t.Errorf("the handler got a record of %d bytes at offset %d, past the limit", len(r.Value), r.Offset)
		}
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, r.Offset)
		return nil
	}), WithLogger(testLogger(t)))
	defer func() { _ = run.Stop() }()

	letters := readDeadLetters(t, brokers, version, topic+".dlq", len(bomb))
	end := good[len(good)-1] + 1
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := offsets.Read(brokers, topic, group)
		if err == nil && p.Committed[0] == end {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("committed offset not at the end, %d, within 30s (progress %+v, error %v)", end, p, err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopSampling)
	<-sampled
	used := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap peak %.1f MiB over the %.1f MiB before", float64(used)/(1<<20), float64(base.HeapAlloc)/(1<<20))
	if used > heapBound {
		t.Errorf("heap grew by %.1f MiB while consuming, over %d MiB: the bomb (%d MiB decompressed) was decoded past the limit",
			float64(used)/(1<<20), heapBound>>20, 4*bombValue>>20)
	}
	mu.Lock()
	got := slices.Sorted(slices.Values(handled))
	mu.Unlock()
	if !slices.Equal(got, good) {
		t.Errorf("handled %v, want the good records %v", got, good)
	}
	var lettered []int64
	for _, l := range letters {
		lettered = append(lettered, l.GetOriginalOffset())
		if l.GetReason() != unreadable || l.GetKey() != nil || l.GetValue() != nil {
			t.Errorf("dead letter at %d: reason %q, key %q, %d bytes of value; want %q, no key, no value",
				l.GetOriginalOffset(), l.GetReason(), l.GetKey(), len(l.GetValue()), unreadable)
		}
	}
	if slices.Sort(lettered); !slices.Equal(lettered, bomb) {
		t.Errorf("dead-lettered %v, want the bomb's offsets %v", lettered, bomb)
	}
}

// readDeadLetters waits up to 60 s for n envelopes on partition 0 of topic,
// and returns those it read.
func readDeadLetters(t *testing.T, brokers []string, version, topic string, n int) []*messages.DeadLetter {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mustVersion(t, version)
	consumer, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	deadline := time.After(60 * time.Second)
	var pc sarama.PartitionConsumer
	for pc == nil { // the listener creates the topic as it starts
		if pc, err = consumer.ConsumePartition(topic, 0, sarama.OffsetOldest); err != nil {
			select {
			case <-deadline:
				t.Fatalf("no dead-letter topic %s within 60s: %v", topic, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	defer pc.Close()
	var out []*messages.DeadLetter
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			var l messages.DeadLetter
			if err := proto.Unmarshal(m.Value, &l); err != nil {
				t.Fatal(err)
			}
			out = append(out, &l)
		case <-deadline:
			t.Errorf("%d dead letters on %s within 60s, want %d", len(out), topic, n)
			return out
		}
	}
	return out
}
