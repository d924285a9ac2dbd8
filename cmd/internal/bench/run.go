// Package bench measures the pipeline against its ceiling (concurrency /
// latency) and against the designs it replaces, side by side in one run,
// and writes the report (docs/benchmarks.md, .json, throughput.png).
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// Point is one measurement.
type Point struct {
	Scenario    string  `json:"scenario"`
	Design      string  `json:"design"` // actors, sequential-per-partition, sequential-consumers
	Broker      string  `json:"broker"` // kfake or kafka
	LatencyMS   float64 `json:"latency_ms"`
	Concurrency int     `json:"concurrency"`
	Partitions  int     `json:"partitions"`
	Records     int64   `json:"records"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"records_per_second"`
	Ideal       float64 `json:"ideal_records_per_second"`
	Ratio       float64 `json:"ratio_to_ideal"`
	CPUMicros   float64 `json:"cpu_microseconds_per_record"`
}

// Window is how long a point is measured, after a warm-up.
type Window struct {
	Warmup, Measure time.Duration
}

const topic = "bench"

// cluster starts a fresh in-process broker with partitions and n records.
func cluster(partitions, n int) (*kfake.Cluster, []string, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic, topic+".dlq"))
	if err != nil {
		return nil, nil, err
	}
	brokers := c.ListenAddrs()
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Messages = 1000
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	p, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	go func() {
		for i := 0; i < n; i++ {
			p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%08d", i)), Value: sarama.StringEncoder(`{"type":"updated"}`)}
		}
	}()
	for i := 0; i < n; i++ {
		select {
		case <-p.Successes():
		case e := <-p.Errors():
			p.Close()
			c.Close()
			return nil, nil, e.Err
		}
	}
	p.Close()
	return c, brokers, nil
}

// sleeper is the in-process handler: it waits latency.
func sleeper(latency time.Duration, done *atomic.Int64) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		if latency > 0 {
			t := time.NewTimer(latency)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		done.Add(1)
		return nil
	})
}

// measure waits for the first record (joining the group and the first fetch
// are not the pipeline's speed), warms up, then counts done over the window
// and the process CPU it cost.
func measure(w Window, done *atomic.Int64, settled func() bool) (n int64, secs, cpuMicros float64) {
	if settled == nil {
		settled = func() bool { return done.Load() > 0 }
	}
	for deadline := time.Now().Add(60 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(w.Warmup)
	start, cpu0, n0 := time.Now(), cpuTime(), done.Load()
	time.Sleep(w.Measure)
	n = done.Load() - n0
	secs = time.Since(start).Seconds()
	if n > 0 {
		cpuMicros = float64(cpuTime()-cpu0) / float64(time.Microsecond) / float64(n)
	}
	return n, secs, cpuMicros
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// recordsFor sizes a point's topic so it cannot run dry during the window.
func recordsFor(ideal float64, w Window) int {
	rate := min(ideal, 80000)
	return int(rate*(w.Warmup+w.Measure).Seconds()*1.3) + 1000
}

// Actors measures the actor pipeline: partitions partitions, total
// concurrency spread evenly, key ordering with a key per record.
func Actors(latency time.Duration, partitions, concurrency int, w Window) (Point, error) {
	ideal := idealRate(concurrency, latency)
	c, brokers, err := cluster(partitions, recordsFor(ideal, w))
	if err != nil {
		return Point{}, err
	}
	defer c.Close()
	settings := actors.DefaultSettings()
	settings.Ordering = ordering.ByKey
	settings.InFlightPerPartition = max(1, concurrency/partitions)
	settings.InFlightTotal = concurrency
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	defer system.Shutdown()
	var done atomic.Int64
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: system, Settings: settings, Handler: sleeper(latency, &done),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
	if err != nil {
		return Point{}, err
	}
	n, secs, cpu, err := runGroup(brokers, settings, bridge, 1, w, &done, nil, 0)
	if err != nil {
		return Point{}, err
	}
	return point("latency-bound", "actors", latency, concurrency, partitions, n, secs, cpu, ideal), nil
}

// runGroup runs members group members with handler and measures.
func runGroup(brokers []string, settings actors.Settings, handler sarama.ConsumerGroupHandler, members int, w Window, done *atomic.Int64, settled func() bool, latency time.Duration) (int64, float64, float64, error) {
	k := actors.KafkaSettings{Brokers: brokers, Topic: topic, Group: "bench", Version: sarama.V3_6_0_0, Assignor: "cooperative-sticky"}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := 0; i < members; i++ {
		cfg, err := actors.NewConsumerConfig(k, settings)
		if err != nil {
			return 0, 0, 0, err
		}
		// A handler that holds a record longer than MaxProcessingTime makes
		// sarama stop fetching its partition; give sequential handlers room,
		// so the baseline is the design's speed, not that stall.
		cfg.Consumer.MaxProcessingTime = max(cfg.Consumer.MaxProcessingTime, 2*latency+100*time.Millisecond)
		g, err := sarama.NewConsumerGroup(brokers, k.Group, cfg)
		if err != nil {
			return 0, 0, 0, err
		}
		wg.Go(func() { _ = actors.RunMember(ctx, g, []string{topic}, handler, slog.New(slog.DiscardHandler)) })
	}
	n, secs, cpu := measure(w, done, settled)
	return n, secs, cpu, nil
}

func idealRate(concurrency int, latency time.Duration) float64 {
	if latency <= 0 {
		return 0
	}
	return float64(concurrency) / latency.Seconds()
}

func point(scenario, design string, latency time.Duration, concurrency, partitions int, n int64, secs, cpu, ideal float64) Point {
	p := Point{Scenario: scenario, Design: design, Broker: "kfake", LatencyMS: float64(latency) / float64(time.Millisecond),
		Concurrency: concurrency, Partitions: partitions, Records: n, Seconds: secs, PerSecond: float64(n) / secs, Ideal: ideal, CPUMicros: cpu}
	if ideal > 0 {
		p.Ratio = p.PerSecond / ideal
	}
	return p
}
