package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/downstream"
	"github.com/patchflow/patchflow/proving/simulated"
)

// Scenario 8: the adaptive in-flight limit against a simulated downstream
// with a capacity: K calls served at once, each taking L, the rest queued
// (downstream.Capacity in the listener's simulated handler). The actor
// pipeline runs behind the real bridge and a broker; only the handler is
// simulated.

// AdaptivePlan is what scenario 8 measures.
type AdaptivePlan struct {
	// Capacity (K) and Service (L) of the downstream in the sweep.
	Capacity int
	Service  time.Duration
	// Fixed are the fixed limits C swept; Laws the adaptive control laws
	// run beside them, each with Ceiling as G; Tolerances the tolerances
	// over 1 the default law runs at too.
	Fixed      []int
	Laws       []limit.Law
	Tolerances []float64
	Ceiling    int
	Window     Window
	// Steps are the capacities of the capacity-change run, each held for
	// Step; a step's figures are taken Settle after its change.
	Steps        []int
	Step, Settle time.Duration
}

// FullAdaptivePlan is what make bench runs.
func FullAdaptivePlan() AdaptivePlan {
	return AdaptivePlan{Capacity: 64, Service: 20 * time.Millisecond, Fixed: []int{16, 32, 64, 128, 256, 1024},
		Laws: []limit.Law{limit.Gradient, limit.Vegas, limit.AIMD}, Tolerances: TolerantTolerances, Ceiling: 1024,
		Window: Window{Warmup: 3 * time.Second, Measure: 6 * time.Second},
		Steps:  []int{64, 16, 128}, Step: 20 * time.Second, Settle: 10 * time.Second}
}

// AdaptivePoint is one measured setting of the sweep.
type AdaptivePoint struct {
	Broker   string  `json:"broker"`
	Capacity int     `json:"capacity"`
	Service  float64 `json:"service_ms"`
	// Mode is "fixed" (Concurrency is C) or "adaptive" (Law, with
	// Concurrency as its ceiling G).
	Mode string `json:"mode"`
	Law  string `json:"law,omitempty"`
	// Tolerance is the adaptive limit's tolerance when over 1.
	Tolerance   float64 `json:"tolerance,omitempty"`
	Concurrency int     `json:"concurrency"`
	Records     int64   `json:"records"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"records_per_second"`
	HandlerMean float64 `json:"handler_mean_ms"`
	HandlerP99  float64 `json:"handler_p99_ms"`
	// MeanLimit is the limit averaged over the window's samples (C when
	// fixed).
	MeanLimit float64 `json:"mean_limit"`
}

// CapacityStep is one step of the capacity-change run.
type CapacityStep struct {
	Capacity int `json:"capacity"`
	// BestFixed is the best fixed C for this capacity: K, the smallest C
	// that keeps every server busy (the sweep shows throughput flat and
	// latency climbing past it); BestFixedPerSecond is that C's throughput,
	// measured in the same run.
	BestFixed          int     `json:"best_fixed_c"`
	BestFixedPerSecond float64 `json:"best_fixed_records_per_second"`
	// SettledAfter is how long after the change the limit entered ±50 %
	// of BestFixed and stayed there to the step's end (-1: it did not).
	SettledAfter float64 `json:"settled_after_s"`
	// From Settle after the change to the step's end:
	PerSecond  float64 `json:"records_per_second"`
	HandlerP99 float64 `json:"handler_p99_ms"`
	MeanLimit  float64 `json:"mean_limit"`
}

// CapacitySample is one moment of the capacity-change run.
type CapacitySample struct {
	T        float64 `json:"t_s"`
	Capacity int     `json:"capacity"`
	Limit    int     `json:"limit"`
	InFlight int     `json:"in_flight"`
}

// CapacityChange is the capacity-change run.
type CapacityChange struct {
	Broker string `json:"broker"`
	Law    string `json:"law"`
	// Tolerance is the adaptive limit's tolerance when over 1.
	Tolerance float64          `json:"tolerance,omitempty"`
	Service   float64          `json:"service_ms"`
	Step      float64          `json:"step_s"`
	Settle    float64          `json:"settle_s"`
	Steps     []CapacityStep   `json:"steps"`
	Timeline  []CapacitySample `json:"timeline"`
}

// AdaptiveResult is scenario 8.
type AdaptiveResult struct {
	Window *Window         `json:"window"`
	Sweep  []AdaptivePoint `json:"sweep"`
	// Changes are the capacity-change runs, one per law, the default
	// (gradient) first, then the default law at each of the plan's
	// tolerances.
	Changes []*CapacityChange `json:"capacity_changes,omitempty"`
}

// latencies records handler attempts that succeeded, with when they ended.
type latencies struct {
	mu   sync.Mutex
	at   []time.Time
	took []time.Duration
	done atomic.Int64
}

func (l *latencies) HandlerDone(outcome string, d time.Duration) {
	if outcome != "ok" {
		return
	}
	now := time.Now()
	l.mu.Lock()
	l.at = append(l.at, now)
	l.took = append(l.took, d)
	l.mu.Unlock()
	l.done.Add(1)
}
func (l *latencies) DrainDone(time.Duration, bool) {}
func (l *latencies) ClaimStarted(string, int32)    {}

// between returns the mean and the 99th percentile, in ms, and the count
// of the attempts that ended in [from, to).
func (l *latencies) between(from, to time.Time) (mean, p99 float64, n int) {
	l.mu.Lock()
	var ms []float64
	for i, at := range l.at {
		if !at.Before(from) && at.Before(to) {
			ms = append(ms, float64(l.took[i])/float64(time.Millisecond))
		}
	}
	l.mu.Unlock()
	if len(ms) == 0 {
		return 0, 0, 0
	}
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	sort.Float64s(ms)
	return sum / float64(len(ms)), percentile(ms, 0.99), len(ms)
}

// simulatedRun is one pipeline run against the capacity-limited handler.
type simulatedRun struct {
	bridge *actors.Bridge
	obs    *latencies
	cap    *downstream.Capacity
	stop   func()
}

// startSimulated starts a bridge with settings behind one group member on
// a topic of records records, with a handler of service time l and
// capacity k, and waits for its first record.
func startSimulated(src Source, partitions, records int, settings actors.Settings, k int, l time.Duration) (*simulatedRun, error) {
	brokers, topic, groupID, produced, done, err := src.Topic(partitions, records)
	if err != nil {
		return nil, err
	}
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	obs := &latencies{}
	capacity := downstream.NewCapacity(k)
	h := simulated.Handler{Latency: l, Capacity: capacity}
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: system, Settings: settings, Handler: simulated.ForPipeline(h), Observer: obs,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
	if err != nil {
		system.Shutdown()
		done()
		return nil, err
	}
	g := group{brokers: brokers, topic: topic, id: groupID, records: produced}
	ctx, cancel := context.WithCancel(context.Background())
	member := make(chan error, 1)
	go func() {
		k := actors.KafkaSettings{Brokers: g.brokers, Topic: g.topic, Group: g.id, Version: saramaVersion, Assignor: "cooperative-sticky"}
		member <- runOneMember(ctx, k, settings, bridge)
	}()
	run := &simulatedRun{bridge: bridge, obs: obs, cap: capacity, stop: func() {
		cancel()
		<-member
		bridge.Close()
		system.Shutdown()
		done()
	}}
	if !waitFor(func() bool { return obs.done.Load() > 0 }, time.Minute) {
		run.stop()
		return nil, fmt.Errorf("no record handled within a minute")
	}
	return run, nil
}

// sweepSettings are the settings of one sweep point: fixed at c, or
// adaptive with law up to ceiling; S is the limit over the partitions
// either way.
func sweepSettings(partitions, c int, adaptive bool, law limit.Law) actors.Settings {
	s := actors.DefaultSettings()
	s.Ordering = ordering.ByKey
	s.InFlightTotal = c
	s.InFlightPerPartition = max(1, c/partitions)
	s.Concurrency = actors.ConcurrencyFixed
	if adaptive {
		s.Concurrency, s.ConcurrencyLaw = actors.ConcurrencyAdaptive, law
	}
	return s
}

// sweepPoint measures one setting over w.
func (p AdaptivePlan) sweepPoint(src Source, partitions, k int, settings actors.Settings) (AdaptivePoint, error) {
	ideal := float64(k) / p.Service.Seconds()
	run, err := startSimulated(src, partitions, recordsFor(ideal, p.Window), settings, k, p.Service)
	if err != nil {
		return AdaptivePoint{}, err
	}
	defer run.stop()
	time.Sleep(p.Window.Warmup)
	from, n0 := time.Now(), run.obs.done.Load()
	var limits, samples float64
	for end := from.Add(p.Window.Measure); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		limits += float64(run.bridge.Concurrency().Limit)
		samples++
	}
	to, n1 := time.Now(), run.obs.done.Load()
	mean, p99, _ := run.obs.between(from, to)
	pt := AdaptivePoint{Broker: src.Name(), Capacity: k, Service: ms(p.Service), Mode: settings.Concurrency.String(),
		Concurrency: settings.InFlightTotal, Records: n1 - n0, Seconds: to.Sub(from).Seconds(),
		HandlerMean: mean, HandlerP99: p99, MeanLimit: limits / samples}
	pt.PerSecond = float64(pt.Records) / pt.Seconds
	if settings.Concurrency == actors.ConcurrencyAdaptive {
		pt.Law, pt.Tolerance = settings.ConcurrencyLaw.String(), tolerance(settings)
	}
	return pt, nil
}

// adaptiveSettings are the adaptive runs of the sweep and of the capacity
// change: each law, then the default law at each tolerance (does a
// tolerance still follow a capacity that falls to a quarter within ±50 %?).
func (p AdaptivePlan) adaptiveSettings(partitions int) []actors.Settings {
	var out []actors.Settings
	for _, law := range p.Laws {
		out = append(out, sweepSettings(partitions, p.Ceiling, true, law))
	}
	for _, tol := range p.Tolerances {
		s := sweepSettings(partitions, p.Ceiling, true, limit.Gradient)
		s.ConcurrencyTolerance = tol
		out = append(out, s)
	}
	return out
}

// tolerance is s's tolerance when over 1, else 0: what a sweep point and a
// capacity-change run record.
func tolerance(s actors.Settings) float64 {
	if s.ConcurrencyTolerance > 1 {
		return s.ConcurrencyTolerance
	}
	return 0
}

// settingsLaw names s's law, and its tolerance when over 1.
func settingsLaw(s actors.Settings) string {
	return AdaptivePoint{Law: s.ConcurrencyLaw.String(), Tolerance: tolerance(s)}.lawText()
}

// Run measures scenario 8 on src.
func (p AdaptivePlan) Run(src Source, partitions int, log io.Writer) (*AdaptiveResult, error) {
	res := &AdaptiveResult{Window: &p.Window}
	report := func(pt AdaptivePoint) {
		label := fmt.Sprintf("fixed C=%d", pt.Concurrency)
		if pt.Mode == "adaptive" {
			label = fmt.Sprintf("adaptive %s (G=%d)", pt.lawText(), pt.Concurrency)
		}
		fmt.Fprintf(log, "%-6s adaptive  K=%-4d L=%v %-42s %8.0f records/s  handler mean %6.1f ms p99 %6.1f ms  mean limit %6.1f\n",
			pt.Broker, pt.Capacity, p.Service, label, pt.PerSecond, pt.HandlerMean, pt.HandlerP99, pt.MeanLimit)
	}
	for _, c := range p.Fixed {
		pt, err := p.sweepPoint(src, partitions, p.Capacity, sweepSettings(partitions, c, false, 0))
		if err != nil {
			return nil, fmt.Errorf("fixed C=%d: %w", c, err)
		}
		report(pt)
		res.Sweep = append(res.Sweep, pt)
	}
	adaptive := p.adaptiveSettings(partitions)
	for _, s := range adaptive {
		pt, err := p.sweepPoint(src, partitions, p.Capacity, s)
		if err != nil {
			return nil, fmt.Errorf("adaptive %s: %w", settingsLaw(s), err)
		}
		report(pt)
		res.Sweep = append(res.Sweep, pt)
	}
	// The best fixed C of each step's capacity other than the sweep's, in
	// the same run.
	for _, k := range p.Steps {
		if k == p.Capacity || slices.ContainsFunc(res.Sweep, func(pt AdaptivePoint) bool { return pt.Capacity == k }) {
			continue
		}
		pt, err := p.sweepPoint(src, partitions, k, sweepSettings(partitions, k, false, 0))
		if err != nil {
			return nil, fmt.Errorf("fixed C=%d at K=%d: %w", k, k, err)
		}
		report(pt)
		res.Sweep = append(res.Sweep, pt)
	}
	for _, s := range adaptive {
		if len(p.Steps) == 0 {
			break
		}
		change, err := p.capacityChange(src, partitions, s, res.Sweep, log)
		if err != nil {
			return nil, fmt.Errorf("capacity change, %s: %w", settingsLaw(s), err)
		}
		res.Changes = append(res.Changes, change)
	}
	return res, nil
}

// capacityChange runs settings' adaptive limit while the downstream's
// capacity steps through p.Steps.
func (p AdaptivePlan) capacityChange(src Source, partitions int, settings actors.Settings, sweep []AdaptivePoint, log io.Writer) (*CapacityChange, error) {
	var records float64
	for _, k := range p.Steps {
		records += float64(k) / p.Service.Seconds() * p.Step.Seconds()
	}
	run, err := startSimulated(src, partitions, int(records*1.3)+1000, settings, p.Steps[0], p.Service)
	if err != nil {
		return nil, err
	}
	defer run.stop()
	out := &CapacityChange{Broker: src.Name(), Law: settings.ConcurrencyLaw.String(), Tolerance: tolerance(settings), Service: ms(p.Service), Step: p.Step.Seconds(), Settle: p.Settle.Seconds()}
	start := time.Now()
	for _, k := range p.Steps {
		run.cap.SetLimit(k)
		changed := time.Now()
		var timeline []CapacitySample
		for end := changed.Add(p.Step); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			c := run.bridge.Concurrency()
			timeline = append(timeline, CapacitySample{T: time.Since(start).Seconds(), Capacity: k, Limit: c.Limit, InFlight: run.bridge.Credits().Held})
		}
		stepEnd := time.Now()
		st := CapacityStep{Capacity: k, BestFixed: k, SettledAfter: -1}
		for _, pt := range sweep {
			if pt.Mode == "fixed" && pt.Capacity == k && pt.Concurrency == k {
				st.BestFixedPerSecond = pt.PerSecond
			}
		}
		lo, hi := 0.5*float64(k), 1.5*float64(k)
		for i := len(timeline) - 1; i >= 0; i-- {
			if l := float64(timeline[i].Limit); l < lo || l > hi {
				break
			}
			st.SettledAfter = timeline[i].T - changed.Sub(start).Seconds()
		}
		settled := changed.Add(p.Settle)
		_, p99, n := run.obs.between(settled, stepEnd)
		st.PerSecond, st.HandlerP99 = float64(n)/stepEnd.Sub(settled).Seconds(), p99
		var sum, cnt float64
		for _, s := range timeline {
			if s.T >= settled.Sub(start).Seconds() {
				sum += float64(s.Limit)
				cnt++
			}
		}
		if cnt > 0 {
			st.MeanLimit = sum / cnt
		}
		fmt.Fprintf(log, "%-6s capacity  %-24s K=%-4d settled after %5.1f s, then %6.0f records/s (C=K fixed: %6.0f), handler p99 %6.1f ms, mean limit %6.1f\n",
			src.Name(), out.lawText(), k, st.SettledAfter, st.PerSecond, st.BestFixedPerSecond, st.HandlerP99, st.MeanLimit)
		out.Steps = append(out.Steps, st)
		out.Timeline = append(out.Timeline, timeline...)
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var saramaVersion = sarama.V3_6_0_0

// runOneMember runs one consumer-group member with handler until ctx ends.
func runOneMember(ctx context.Context, k actors.KafkaSettings, settings actors.Settings, handler sarama.ConsumerGroupHandler) error {
	cfg, err := actors.NewConsumerConfig(k, settings)
	if err != nil {
		return err
	}
	cg, err := sarama.NewConsumerGroup(k.Brokers, k.Group, cfg)
	if err != nil {
		return err
	}
	return actors.RunMember(ctx, cg, []string{k.Topic}, handler, slog.New(slog.DiscardHandler))
}
