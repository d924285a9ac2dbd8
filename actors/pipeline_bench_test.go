package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// BenchmarkPipeline measures the whole pipeline (kfake broker, sarama group
// member, bridge, partition and evaluation actors, marking and committing)
// with a handler that only waits the given latency. 8 partitions, S = 64,
// key ordering with a distinct key per record. It reports records/s from the
// first admission to the last finish, and the ratio to the ceiling
// concurrency / latency = 8 * 64 / latency.
//
//	go test ./actors -run '^$' -bench Pipeline -benchtime 100000x
func BenchmarkPipeline(b *testing.B) {
	for _, latency := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%v", latency), func(b *testing.B) {
			benchmarkPipeline(b, latency, 8, 64)
		})
	}
}

func benchmarkPipeline(b *testing.B, latency time.Duration, partitions, perPartition int) {
	topic := "bench"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic, topic+".dlq"))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	k := actors.KafkaSettings{Brokers: cluster.ListenAddrs(), Topic: topic, Group: "bench", Version: sarama.V3_6_0_0, Assignor: "cooperative-sticky"}
	produceDistinct(b, k, b.N)

	settings := actors.DefaultSettings()
	settings.Ordering = ordering.ByKey
	settings.InFlightPerPartition = perPartition
	settings.InFlightTotal = partitions * perPartition
	system := actors.NewActorSystem(discardLogger())
	defer system.Shutdown()
	handler := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		if latency == 0 {
			return nil
		}
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: system, Settings: settings, Handler: handler,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
	if err != nil {
		b.Fatal(err)
	}
	ccfg, err := actors.NewConsumerConfig(k, settings)
	if err != nil {
		b.Fatal(err)
	}
	cg, err := sarama.NewConsumerGroup(k.Brokers, k.Group, ccfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		_ = actors.RunMember(ctx, cg, []string{topic}, bridge, discardLogger())
	}()
	stats := bridge.Stats()
	for stats.Snapshot().Admitted == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	began := time.Now()
	var inFlightSum, samples int64
	for {
		s := stats.Snapshot()
		if s.Succeeded >= int64(b.N) {
			break
		}
		inFlightSum += s.InFlight
		samples++
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	cancel()
	<-done
	rps := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rps, "records/s")
	if latency > 0 {
		ceiling := float64(partitions*perPartition) / latency.Seconds()
		b.ReportMetric(rps/ceiling, "ratio-to-ceiling")
	}
	// Little's law: records/s = in flight / latency. A mean in flight below
	// the concurrency means the feed (fetching, credits) is the limit; a
	// full pipeline below the ceiling means per-record latency grew.
	b.ReportMetric(float64(inFlightSum)/float64(max(samples, 1)), "mean-in-flight")
}

// produceDistinct writes n small records, each with its own key.
func produceDistinct(b *testing.B, k actors.KafkaSettings, n int) {
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Messages = 1000
	cfg.Producer.Flush.Frequency = 10 * time.Millisecond // else a last partial batch waits forever
	producer, err := sarama.NewAsyncProducer(k.Brokers, cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for i := 0; i < n; i++ {
			producer.Input() <- &sarama.ProducerMessage{Topic: k.Topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%08d", i)),
				Value: sarama.StringEncoder(`{"type":"updated"}`)}
		}
	}()
	for i := 0; i < n; i++ {
		select {
		case <-producer.Successes():
		case err := <-producer.Errors():
			b.Fatal(err)
		}
	}
	_ = producer.Close()
}
