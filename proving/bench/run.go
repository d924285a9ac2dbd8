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

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/simulated"
)

// Point is one measurement.
type Point struct {
	Scenario    string  `json:"scenario"`
	Design      string  `json:"design"` // actors, pool, sequential-per-partition, sequential-consumers, sequential-sync-commit
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

// Window is how a point is measured: for Measure after a Warmup, or, when
// Records is set (handlers that cost nothing outrun any topic sized by
// time), over a topic of Records records from the 10th to the 90th
// percentile of them, so neither the start nor the tail counts.
type Window struct {
	Warmup, Measure time.Duration
	Records         int
}

// sleeper is the in-process handler: the listener's simulated handler
// (it waits latency), counting the records it finished.
func sleeper(latency time.Duration, done *atomic.Int64) actors.Handler {
	sim := simulated.ForPipeline(simulated.Handler{Latency: latency})
	return actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		if err := sim.Handle(ctx, r); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
}

// measure waits until settled (by default: the first record handled;
// joining the group and the first fetch are not the pipeline's speed),
// then counts done and the process CPU it cost: over the window after a
// warm-up, or from the 10th to the 90th percentile of w.Records. The topic
// holds produced records; a point that handled them all ran dry, and its
// rate would understate the pipeline, so that is an error.
func measure(w Window, done *atomic.Int64, settled func() bool, produced int64) (n int64, secs, cpuMicros float64, err error) {
	if settled == nil {
		settled = func() bool { return done.Load() > 0 }
	}
	from, to := int64(w.Records)/10, int64(w.Records)*9/10
	if w.Records > 0 {
		settled = func() bool { return done.Load() >= from }
	}
	if !waitFor(settled, time.Minute) {
		return 0, 0, 0, fmt.Errorf("the consumers did not settle within a minute (%d records handled)", done.Load())
	}
	if w.Records == 0 {
		time.Sleep(w.Warmup)
	}
	start, cpu0, n0 := time.Now(), cpuTime(), done.Load()
	if w.Records > 0 {
		if !waitFor(func() bool { return done.Load() >= to }, 2*time.Minute) {
			return 0, 0, 0, fmt.Errorf("only %d of %d records handled in two minutes", done.Load(), to)
		}
	} else {
		time.Sleep(w.Measure)
	}
	n = done.Load() - n0
	secs = time.Since(start).Seconds()
	if n > 0 {
		cpuMicros = float64(cpuTime()-cpu0) / float64(time.Microsecond) / float64(n)
	}
	if w.Records == 0 && done.Load() >= produced {
		return 0, 0, 0, fmt.Errorf("the topic ran dry: all %d records handled before the window closed", produced)
	}
	return n, secs, cpuMicros, nil
}

// waitFor polls cond every millisecond until it holds (true) or limit
// passes (false).
func waitFor(cond func() bool, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// recordsFor sizes a point's topic so it cannot run dry during the window.
func recordsFor(ideal float64, w Window) int {
	if w.Records > 0 {
		return w.Records
	}
	// Above 300,000 records/s the pipeline is CPU-bound on any machine
	// this runs on; measure asserts the topic did not run dry.
	rate := ideal
	if rate <= 0 || rate > 300000 {
		rate = 300000
	}
	return int(rate*(w.Warmup+w.Measure).Seconds()*1.3) + 1000
}

// Scenarios of the report.
const (
	ScenarioLatency  = "latency-bound"
	ScenarioBaseline = "baseline"
	ScenarioOverhead = "overhead-bound"
)

// Design names what runs behind the bridge.
const (
	DesignActors = "actors" // the PartitionActor and its EvaluationActors: production
	DesignPool   = "pool"   // a plain goroutine worker pool, same bridge, ledger and gate
)

// Pipeline measures design behind the bridge: partitions partitions, total
// concurrency spread evenly (S = concurrency / partitions, G =
// concurrency), key ordering with a key per record, a handler that waits
// latency (0: returns at once).
func Pipeline(src Source, scenario, design string, latency time.Duration, partitions, concurrency int, w Window) (Point, error) {
	ideal := idealRate(concurrency, latency)
	brokers, topic, groupID, produced, done, err := src.Topic(partitions, recordsFor(ideal, w))
	if err != nil {
		return Point{}, err
	}
	defer done()
	settings := actors.DefaultSettings()
	// A point is measured at its concurrency: the limit is fixed there
	// (scenario 8 measures the adaptive limit).
	settings.Concurrency = actors.ConcurrencyFixed
	settings.Ordering = ordering.ByKey
	settings.InFlightPerPartition = max(1, concurrency/partitions)
	settings.InFlightTotal = concurrency
	var handled atomic.Int64
	handler := sleeper(latency, &handled)
	cfg := actors.BridgeConfig{Settings: settings, Handler: handler,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })}
	switch design {
	case DesignActors:
		system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
		defer system.Shutdown()
		cfg.System = system
	case DesignPool:
		p := newPool(concurrency, handler)
		defer p.close()
		cfg.NewWorker = p.newWorker
	default:
		return Point{}, fmt.Errorf("unknown design %q", design)
	}
	bridge, err := actors.NewBridge(cfg)
	if err != nil {
		return Point{}, err
	}
	n, secs, cpu, err := runGroup(group{brokers: brokers, topic: topic, id: groupID, records: produced}, settings, bridge, 1, w, &handled, nil, 0)
	if err != nil {
		return Point{}, err
	}
	return point(src.Name(), scenario, design, latency, concurrency, partitions, n, secs, cpu, ideal), nil
}

// group is where a point's consumer group reads.
type group struct {
	brokers []string
	topic   string
	id      string
	records int // in the topic
}

// runGroup runs members group members with handler and measures. The
// members leave the group (and the bridge drains) before it returns.
func runGroup(g group, settings actors.Settings, handler sarama.ConsumerGroupHandler, members int, w Window, done *atomic.Int64, settled func() bool, latency time.Duration) (int64, float64, float64, error) {
	k := actors.KafkaSettings{Brokers: g.brokers, Topic: g.topic, Group: g.id, Version: sarama.V3_6_0_0, Assignor: "cooperative-sticky"}
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
		cg, err := sarama.NewConsumerGroup(g.brokers, k.Group, cfg)
		if err != nil {
			return 0, 0, 0, err
		}
		wg.Go(func() { _ = actors.RunMember(ctx, cg, []string{g.topic}, handler, slog.New(slog.DiscardHandler)) })
	}
	return measure(w, done, settled, int64(g.records))
}

func idealRate(concurrency int, latency time.Duration) float64 {
	if latency <= 0 {
		return 0
	}
	return float64(concurrency) / latency.Seconds()
}

func point(broker, scenario, design string, latency time.Duration, concurrency, partitions int, n int64, secs, cpu, ideal float64) Point {
	p := Point{Scenario: scenario, Design: design, Broker: broker, LatencyMS: float64(latency) / float64(time.Millisecond),
		Concurrency: concurrency, Partitions: partitions, Records: n, Seconds: secs, PerSecond: float64(n) / secs, Ideal: ideal, CPUMicros: cpu}
	if ideal > 0 {
		p.Ratio = p.PerSecond / ideal
	}
	return p
}
