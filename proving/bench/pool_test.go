package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/offsets"
)

// watchedMarker checks every mark against what the handler finished: a
// mark m of a partition means every offset below m is finished.
type watchedMarker struct {
	inner    actors.OffsetMarker
	mu       *sync.Mutex
	finished map[int32]map[int64]bool
	bad      *atomic.Int64
}

func (w *watchedMarker) MarkOffset(topic string, partition int32, offset int64, meta string) {
	w.mu.Lock()
	for o := int64(0); o < offset; o++ {
		if !w.finished[partition][o] {
			w.bad.Add(1)
			break
		}
	}
	w.mu.Unlock()
	w.inner.MarkOffset(topic, partition, offset, meta)
}

func (w *watchedMarker) ResetOffset(topic string, partition int32, offset int64, meta string) {
	w.inner.ResetOffset(topic, partition, offset, meta)
}

// The goroutine pool the benchmark compares against keeps the pipeline's
// guarantees: every record handled, one record per key at a time in offset
// order, no mark past an unfinished record, every partition committed to
// its end. Otherwise the comparison would flatter it.
func TestPoolKeepsThePipelineGuarantees(t *testing.T) {
	const partitions, records, keys = 4, 4000, 50
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "pool"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	if err := produceKeyed(brokers, "pool", records, keys); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		finished = map[int32]map[int64]bool{}
		running  = map[string]bool{}
		last     = map[string]int64{}
		bad      atomic.Int64
		handled  atomic.Int64
	)
	for p := int32(0); p < partitions; p++ {
		finished[p] = map[int64]bool{}
	}
	handler := actors.HandlerFunc(func(_ context.Context, r *messages.Record) error {
		key := fmt.Sprintf("%d/%s", r.GetPartition(), r.GetKey())
		mu.Lock()
		if running[key] {
			bad.Add(1) // two records of one key at once
		}
		if prev, seen := last[key]; seen && prev > r.GetOffset() {
			bad.Add(1) // out of order within a key
		}
		running[key], last[key] = true, r.GetOffset()
		mu.Unlock()
		time.Sleep(time.Duration(r.GetOffset()%3) * time.Millisecond)
		mu.Lock()
		running[key] = false
		finished[r.GetPartition()][r.GetOffset()] = true
		mu.Unlock()
		handled.Add(1)
		return nil
	})
	settings := actors.DefaultSettings()
	settings.Concurrency = actors.ConcurrencyFixed // the pool has no partition actors to sample
	settings.InFlightPerPartition, settings.InFlightTotal = 16, 32
	p := newPool(settings.InFlightTotal, handler)
	bridge, err := actors.NewBridge(actors.BridgeConfig{Settings: settings, Handler: handler, NewWorker: p.newWorker,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		WrapMarker: func(m actors.OffsetMarker) actors.OffsetMarker {
			return &watchedMarker{inner: m, mu: &mu, finished: finished, bad: &bad}
		}})
	if err != nil {
		t.Fatal(err)
	}
	k := actors.KafkaSettings{Brokers: brokers, Topic: "pool", Group: "pool", Version: sarama.V3_6_0_0, Assignor: "cooperative-sticky"}
	cfg, err := actors.NewConsumerConfig(k, settings)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sarama.NewConsumerGroup(brokers, k.Group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = actors.RunMember(ctx, g, []string{"pool"}, bridge, slog.New(slog.DiscardHandler))
	}()
	waitFor(func() bool { return handled.Load() >= records }, time.Minute)
	// The last marks reach Kafka with the next auto-commit.
	waitFor(func() bool { return committed(t, brokers, "pool", "pool") >= records }, 30*time.Second)
	cancel()
	<-done
	p.close()

	if n := handled.Load(); n != records {
		t.Fatalf("handled %d of %d records", n, records)
	}
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d violations of key order or of the watermark", n)
	}
	if n := committed(t, brokers, "pool", "pool"); n != records {
		t.Fatalf("committed %d of %d", n, records)
	}
}

// produceKeyed writes n records with keys k-0 .. k-(keys-1) in turn.
func produceKeyed(brokers []string, topic string, n, keys int) error {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k-%d", i%keys)), Value: sarama.StringEncoder("v")}
	}
	return p.SendMessages(msgs)
}

// committed sums the group's committed offsets over the topic.
func committed(t *testing.T, brokers []string, topic, group string) int64 {
	t.Helper()
	p, err := offsets.Read(brokers, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	return p.Done()
}
