// Package demo runs the listener end to end on embedded defaults: an
// in-process Kafka broker, a generated stream of records, the pipeline with
// the simulated handler, live progress, and a summary that checks every
// partition was committed to its end and compares throughput with the
// one-at-a-time baseline.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/cmd/internal/listener"
)

// Options choose the demo's size.
type Options struct {
	Records    int
	Hosts      int
	PoisonRate float64 // share of records the handler rejects as malformed
}

// Run executes the demo, writing progress and the summary to out. cfg is the
// listener configuration (embedded brokers); it returns an error when the
// run did not end with every partition committed to its end.
func Run(ctx context.Context, cfg *listener.Config, opts Options, out io.Writer, logger *slog.Logger) error {
	k := cfg.Kafka
	cluster, err := listener.StartEmbedded(k.Topic, k.DLQTopic, cfg.EmbeddedPartitions)
	if err != nil {
		return err
	}
	defer cluster.Close()
	cfg.Brokers = cluster.ListenAddrs()
	cfg.Kafka.Brokers = cfg.Brokers
	k = cfg.Kafka
	fmt.Fprintf(out, "embedded Kafka broker on %v, topic %s with %d partitions\n", cfg.Brokers, k.Topic, cfg.EmbeddedPartitions)

	poison, err := produce(k, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "produced %d records for %d hosts (%d malformed)\n", opts.Records, opts.Hosts, poison)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bridge *actors.Bridge
	ready := make(chan struct{})
	done := make(chan error, 1)
	handler := listener.SimulatedHandler{Latency: cfg.SimulatedLatency, Jitter: cfg.SimulatedJitter}
	go func() {
		done <- listener.RunWith(runCtx, cfg, handler, logger, func(b *actors.Bridge) { bridge = b; close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		return err
	}

	ends, err := endOffsets(k)
	if err != nil {
		return err
	}
	stats := bridge.Stats()
	for stats.Snapshot().Admitted == 0 {
		time.Sleep(time.Millisecond)
	}
	began := time.Now()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	var prev int64
	var finishedAfter time.Duration
	lastLine := began
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-done
			return ctx.Err()
		case err := <-done:
			return fmt.Errorf("listener stopped early: %v", err)
		case <-poll.C:
		}
		s := stats.Snapshot()
		finished := s.Succeeded + s.DeadLettered
		if finishedAfter == 0 && finished >= int64(opts.Records) {
			finishedAfter = time.Since(began)
		}
		if now := time.Now(); now.Sub(lastLine) >= time.Second || finishedAfter > 0 && prev < finished {
			fmt.Fprintf(out, "  %6.1fs  %6d/%d finished  %6.0f records/s  in flight %4d  dead-lettered %d\n",
				now.Sub(began).Seconds(), finished, opts.Records, float64(finished-prev)/now.Sub(lastLine).Seconds(), s.InFlight, s.DeadLettered)
			prev, lastLine = finished, now
		}
		if finishedAfter == 0 {
			continue
		}
		committed, err := committedOffsets(k)
		if err != nil || !equal(committed, ends) {
			continue // the last commit lands within the auto-commit interval
		}
		committedAfter := time.Since(began)
		cancel()
		if err := <-done; err != nil {
			return err
		}
		summary(out, cfg, opts, stats.Snapshot(), poison, finishedAfter, committedAfter)
		return nil
	}
}

func summary(out io.Writer, cfg *listener.Config, opts Options, s actors.StatsSnapshot, poison int, elapsed, committed time.Duration) {
	p := cfg.Pipeline
	latency := cfg.SimulatedLatency + cfg.SimulatedJitter/2
	concurrency := min(cfg.EmbeddedPartitions*p.InFlightPerPartition, p.InFlightTotal)
	rate := float64(opts.Records) / elapsed.Seconds()
	ceiling := float64(concurrency) / latency.Seconds()
	sequential := float64(cfg.EmbeddedPartitions) / latency.Seconds()
	fmt.Fprintf(out, "\nsummary\n")
	fmt.Fprintf(out, "  records           %d (succeeded %d, dead-lettered %d of %d malformed, retried %d)\n", opts.Records, s.Succeeded, s.DeadLettered, poison, s.Retried)
	fmt.Fprintf(out, "  committed         every partition at its end offset: nothing lost, nothing skipped\n")
	fmt.Fprintf(out, "  duplicates        %d handled twice (redelivered after a drain)\n", s.Succeeded+s.DeadLettered-int64(opts.Records))
	fmt.Fprintf(out, "  time              %v to finish every record, %v until the last commit landed\n", elapsed.Round(time.Millisecond), committed.Round(time.Millisecond))
	fmt.Fprintf(out, "  throughput        %.0f records/s at mean handler latency %v\n", rate, latency)
	fmt.Fprintf(out, "  ceiling           %.0f records/s (concurrency %d / latency): %.2f of it\n", ceiling, concurrency, rate/ceiling)
	fmt.Fprintf(out, "  sequential        %.0f records/s (one record at a time per partition, %d partitions): %.1fx faster\n", sequential, cfg.EmbeddedPartitions, rate/sequential)
}

func produce(k actors.KafkaSettings, opts Options) (poison int, err error) {
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Messages = 500
	cfg.Producer.Flush.Frequency = 10 * time.Millisecond
	p, err := sarama.NewAsyncProducer(k.Brokers, cfg)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(42, 7))
	go func() {
		for i := 0; i < opts.Records; i++ {
			value := fmt.Sprintf(`{"type":"updated","seq":%d}`, i)
			if rng.Float64() < opts.PoisonRate {
				value = listener.PoisonPrefix + value
				poison++
			}
			p.Input() <- &sarama.ProducerMessage{Topic: k.Topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%06d", rng.IntN(opts.Hosts))), Value: sarama.StringEncoder(value)}
		}
	}()
	for i := 0; i < opts.Records; i++ {
		select {
		case <-p.Successes():
		case e := <-p.Errors():
			return 0, e.Err
		}
	}
	return poison, nil
}

func endOffsets(k actors.KafkaSettings) (map[int32]int64, error) {
	client, err := sarama.NewClient(k.Brokers, sarama.NewConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	parts, err := client.Partitions(k.Topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, p := range parts {
		if out[p], err = client.GetOffset(k.Topic, p, sarama.OffsetNewest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func committedOffsets(k actors.KafkaSettings) (map[int32]int64, error) {
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	admin, err := sarama.NewClusterAdmin(k.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	res, err := admin.ListConsumerGroupOffsets(k.Group, nil)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, b := range res.Blocks[k.Topic] {
		out[p] = b.Offset
	}
	return out, nil
}

func equal(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, v := range b {
		if a[p] != v {
			return false
		}
	}
	return true
}
