package bench

import (
	"fmt"
	"io"
	"time"
)

// Plan is which points a run measures and for how long.
type Plan struct {
	// Peer is scenario 12's set-up (its brokers, harness and log are the
	// run's).
	Peer          Peer
	Partitions    int
	Latencies     []time.Duration
	Concurrencies []int
	Short, Long   Window // Long for latencies of 500 ms and more
	// Members is the number of consumers of the sequential-consumers
	// baseline.
	Members int
	// Overhead: the handler costs nothing; each design is measured Rounds
	// times, interleaved, at OverheadConcurrency over a topic of
	// OverheadRecords.
	OverheadConcurrency, OverheadRecords, Rounds int
	// End to end, new hosts: EndToEndEvents events per configuration (the
	// sequential one gets SequentialEvents: it is slow) over Hosts hosts;
	// re-check-in: RecheckHosts hosts created, then RecheckEvents timed;
	// WarmupEvents for each listener's database first.
	EndToEndEvents, SequentialEvents, Hosts int
	// UnloadedEvents run one at a time in the whole process (G = 1): the
	// handler's time with nothing else in flight.
	UnloadedEvents                            int
	RecheckEvents, RecheckHosts, WarmupEvents int
	// CompareRounds is how many rounds the configurations that judge the
	// adaptive limit (CompareConfigs) run in, interleaved, each round in
	// another order: one run of each is at the mercy of the machine's
	// drift, which moves a configuration's systems/s by a tenth or more.
	// Each of them but the unloaded one handles CompareEvents events: the
	// adaptive limit's first seconds (its baseline from a cold start,
	// its first probe) must not be most of the window, as they were of
	// EndToEndEvents.
	CompareRounds, CompareEvents int
	// Memory: backlogs of MemoryRecordBytes records at MemoryConcurrency,
	// each watched for MemoryWindow with a handler of MemoryLatency.
	MemoryBacklogs                       []int
	MemoryRecordBytes, MemoryConcurrency int
	MemoryLatency, MemoryWindow          time.Duration
	// Memory with a pinned record: on the largest backlog's topic, the
	// record at PinOffset of every partition never finishes; the handler
	// waits PinLatency; watched for PinWindow, whose last PinHold must admit
	// nothing once the span limit is reached.
	PinOffset                      int64
	PinLatency, PinWindow, PinHold time.Duration
	// Crash replay: CrashRecords of CrashRecordBytes with CrashKeys keys, a
	// handler of CrashLatency, CrashConcurrency in flight (CrashPerPartition
	// per partition), killed once CrashKillAt of the records are handled,
	// at each of CrashKills (KillAfterCommit, KillAnywhere) in turn, every
	// listener in turn.
	CrashKills                                                                     []string
	CrashRecords, CrashRecordBytes, CrashKeys, CrashConcurrency, CrashPerPartition int
	CrashLatency                                                                   time.Duration
	CrashKillAt                                                                    float64
	// Reads: the reads scenario (7).
	Reads ReadsPlan
	// Adaptive: the adaptive-limit scenario (8).
	Adaptive AdaptivePlan
	// Start: the adaptive limit's start (9).
	Start StartPlan
}

// FullPlan is what `make bench` runs.
func FullPlan() Plan {
	return Plan{
		Partitions:          8,
		Latencies:           []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond},
		Concurrencies:       []int{16, 64, 256, 1024, 4096},
		Short:               Window{Warmup: time.Second, Measure: 3 * time.Second},
		Long:                Window{Warmup: 2 * time.Second, Measure: 5 * time.Second},
		Members:             4,
		OverheadConcurrency: 512, OverheadRecords: 1_000_000, Rounds: 2,
		EndToEndEvents: 2000, SequentialEvents: 600, Hosts: 1000, UnloadedEvents: 150,
		RecheckEvents: 2000, RecheckHosts: 1000, WarmupEvents: 400, CompareRounds: 3, CompareEvents: 4000,
		MemoryBacklogs: []int{100_000, 1_000_000}, MemoryRecordBytes: 1024, MemoryConcurrency: 1024,
		MemoryLatency: 200 * time.Millisecond, MemoryWindow: 15 * time.Second,
		PinOffset: 100, PinLatency: 10 * time.Millisecond, PinWindow: 30 * time.Second, PinHold: 5 * time.Second,
		CrashRecords: 200_000, CrashRecordBytes: 1024, CrashKeys: 10_000, CrashConcurrency: 1024, CrashPerPartition: 128,
		CrashKills:   []string{KillAfterCommit, KillAnywhere},
		CrashLatency: 100 * time.Millisecond, CrashKillAt: 0.5,
		Reads:    FullReadsPlan(),
		Adaptive: FullAdaptivePlan(),
		Start:    FullStartPlan(),
		Peer: Peer{Records: 40_000, RecordBytes: 1000, Partitions: 8, Keys: 10_000, Concurrency: 256, BatchSize: 64,
			Latency: 5 * time.Millisecond, Rounds: 2},
	}
}

// QuickPlan is a smoke run of every scenario in well under a minute per broker.
func QuickPlan() Plan {
	p := FullPlan()
	p.Latencies = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond}
	p.Concurrencies = []int{16, 256}
	p.Short = Window{Warmup: 300 * time.Millisecond, Measure: time.Second}
	p.Long = p.Short
	p.OverheadRecords, p.Rounds = 200_000, 1
	p.EndToEndEvents, p.SequentialEvents, p.Hosts, p.UnloadedEvents = 300, 100, 150, 40
	p.RecheckEvents, p.RecheckHosts, p.WarmupEvents, p.CompareRounds, p.CompareEvents = 300, 150, 50, 1, 300
	p.MemoryBacklogs, p.MemoryWindow = []int{50_000, 500_000}, 5*time.Second
	p.PinWindow, p.PinHold = 20*time.Second, 3*time.Second
	p.CrashRecords = 40_000
	p.Reads = QuickReadsPlan()
	p.Adaptive.Fixed, p.Adaptive.Window = []int{32, 64, 1024}, Window{Warmup: time.Second, Measure: 2 * time.Second}
	p.Adaptive.Step, p.Adaptive.Settle = 8*time.Second, 4*time.Second
	p.Start.Cases, p.Start.Watch = p.Start.Cases[:1], 4*time.Second
	p.Peer.Records, p.Peer.Rounds = 5000, 1
	return p
}

// Describe says what the plan measures, for the report.
func (p Plan) Describe() string {
	return fmt.Sprintf("%d partitions; key ordering with a distinct key per record; total concurrency C spread evenly "+
		"(S = C / %d per partition, G = C); windows: %v warm-up + %v measured (%v + %v at 500 ms); "+
		"overhead-bound: %d records at C = %d, the 10th to 90th percentile timed, %d round(s) per design, interleaved",
		p.Partitions, p.Partitions, p.Short.Warmup, p.Short.Measure, p.Long.Warmup, p.Long.Measure,
		p.OverheadRecords, p.OverheadConcurrency, p.Rounds)
}

func (p Plan) window(latency time.Duration) Window {
	if latency >= 500*time.Millisecond {
		return p.Long
	}
	return p.Short
}

// RunCore measures scenarios 1 to 3 on src and adds the points to r.
func (p Plan) RunCore(src Source, r *Report, log io.Writer) error {
	record := func(pt Point) error {
		r.Points = append(r.Points, pt)
		line := fmt.Sprintf("%-6s %-14s %-26s L=%-6v C=%-5d %10.0f records/s", src.Name(), pt.Scenario, pt.Design,
			time.Duration(pt.LatencyMS*float64(time.Millisecond)), pt.Concurrency, pt.PerSecond)
		if pt.Ideal > 0 {
			line += fmt.Sprintf("  ideal %9.0f  ratio %.2f", pt.Ideal, pt.Ratio)
		}
		fmt.Fprintf(log, "%s  %5.1f us CPU/record\n", line, pt.CPUMicros)
		return nil
	}
	add := func(what string) func(Point, error) error {
		return func(pt Point, err error) error {
			if err != nil {
				return fmt.Errorf("%s on %s: %w", what, src.Name(), err)
			}
			return record(pt)
		}
	}
	for _, latency := range p.Latencies {
		w := p.window(latency)
		for _, c := range p.Concurrencies {
			if err := add(fmt.Sprintf("actors at L = %v, C = %d", latency, c))(Pipeline(src, ScenarioLatency, DesignActors, latency, p.Partitions, c, w)); err != nil {
				return err
			}
		}
		baselines := []string{DesignSequential, DesignSequentialConsumers}
		if latency == 100*time.Millisecond {
			baselines = append(baselines, DesignSequentialSyncCommit)
		}
		for _, design := range baselines {
			if err := add(fmt.Sprintf("%s at L = %v", design, latency))(Sequential(src, design, latency, p.Partitions, p.Members, w)); err != nil {
				return err
			}
		}
	}
	w := Window{Records: p.OverheadRecords}
	for range p.Rounds {
		for _, design := range []string{DesignActors, DesignPool} {
			if err := add(design + " at L = 0")(Pipeline(src, ScenarioOverhead, design, 0, p.Partitions, p.OverheadConcurrency, w)); err != nil {
				return err
			}
		}
	}
	return nil
}

// EndToEndWarmup runs for each listener before its measured
// configurations and is not reported: package and advisory names are
// shared by every host, so whichever configuration ran first in a
// listener's database would pay alone for inserting them.
func (p Plan) EndToEndWarmup() EndToEndConfig {
	return EndToEndConfig{Name: "warm-up", Workload: WorkloadNewHosts, Events: p.WarmupEvents, Hosts: max(p.WarmupEvents/2, 1)}
}

// Names of the end-to-end configurations that compare the adaptive limit
// with fixed ones.
const (
	ConfigDefault      = "default"
	ConfigAdaptive     = "adaptive"
	ConfigFixedDefault = "fixed G=1024"
	ConfigFixed32      = "fixed G=32"
	ConfigFixed48      = "fixed G=48"
	ConfigFixed64      = "fixed G=64"
	ConfigUnloaded     = "unloaded (G=1)"
	ConfigEffectsOn    = "effects on"
	ConfigEffectsOff   = "effects off"
)

// EndToEndConfigs are the configurations of scenario 4, each run by every
// listener in turn (unless it names one): the listeners' default settings
// on new hosts and on re-check-ins, the old design (one event at a time
// per partition) for this listener only, then CompareRounds rounds of
// CompareConfigs.
func (p Plan) EndToEndConfigs() []EndToEndConfig {
	out := []EndToEndConfig{
		{Name: ConfigDefault, Workload: WorkloadNewHosts, Events: p.EndToEndEvents, Hosts: p.Hosts},
		{Name: ConfigDefault, Workload: WorkloadRecheck, Events: p.RecheckEvents, Hosts: p.RecheckHosts},
		{Name: "sequential", Workload: WorkloadNewHosts, PerPartition: 1, Total: p.Partitions, Ordering: "partition", Events: p.SequentialEvents,
			Hosts: max(p.SequentialEvents/2, 1), OnlyListener: ListenerAfter},
	}

	compare := p.CompareConfigs()
	for r := range p.CompareRounds {
		// Round r starts r configurations further on: each configuration
		// runs early in one round and late in another, so the machine's
		// drift over the rounds falls on none alone.
		for i := range compare {
			c := compare[(i+r)%len(compare)]
			c.Round = r + 1
			out = append(out, c)
		}
	}
	return out
}

// EffectsConfigs are scenario 11's: this listener on new hosts with the
// outbox's messages on and off, in the order on, off, off, on, twice, so
// the machine's drift over the run falls on neither (two runs of each were
// 264 and 354 systems/s apart on this machine: one pair says little); then
// the same on new hosts of known orgs.
func (p Plan) EffectsConfigs() []EndToEndConfig {
	var out []EndToEndConfig
	for _, w := range []string{WorkloadNewHosts, WorkloadNewHostsKnownOrgs} {
		effects := func(off bool) EndToEndConfig {
			name := ConfigEffectsOn
			if off {
				name = ConfigEffectsOff
			}
			return EndToEndConfig{Name: name, Workload: w, EffectsOff: off, Events: p.CompareEvents, Hosts: p.CompareEvents / 2, OnlyListener: ListenerAfter}
		}
		abba := []EndToEndConfig{effects(false), effects(true), effects(true), effects(false)}
		out = append(append(out, abba...), abba...)
	}
	return out
}

// TolerantTolerances are the tolerances (LISTENER_CONCURRENCY_TOLERANCE) the
// adaptive limit is measured at beside its default of 1: Envoy's adaptive
// concurrency filter's default (a buffer of 25 % over its minimum RTT) and
// Netflix Gradient2's, not values tuned to this machine.
var TolerantTolerances = []float64{1.25, 1.5}

// TolerantConfig names the adaptive limit's configuration at tolerance t.
func TolerantConfig(t float64) string { return fmt.Sprintf("adaptive, tolerance %g", t) }

// CompareConfigs judge the adaptive limit, this listener only, on new
// hosts: the adaptive limit (the default since issue 13) at its default
// tolerance and at each of TolerantTolerances, fixed limits around where it
// settles, the fixed default before it, and the handler's time with
// nothing else in flight.
func (p Plan) CompareConfigs() []EndToEndConfig {
	compared := func(name, concurrency string) EndToEndConfig {
		return EndToEndConfig{Name: name, Workload: WorkloadNewHosts, Concurrency: concurrency, Events: p.CompareEvents, Hosts: p.CompareEvents / 2, OnlyListener: ListenerAfter}
	}
	fixed := func(name string, total int) EndToEndConfig {
		c := compared(name, "fixed")
		c.Total = total
		return c
	}
	out := []EndToEndConfig{compared(ConfigAdaptive, "adaptive")}
	for _, t := range TolerantTolerances {
		c := compared(TolerantConfig(t), "adaptive")
		c.Tolerance = t
		out = append(out, c)
	}
	return append(out,
		fixed(ConfigFixedDefault, 0),
		fixed(ConfigFixed32, 32),
		fixed(ConfigFixed48, 48),
		fixed(ConfigFixed64, 64),
		EndToEndConfig{Name: ConfigUnloaded, Workload: WorkloadNewHosts, Concurrency: "fixed", PerPartition: 1, Total: 1, Events: p.UnloadedEvents,
			Hosts: max(p.UnloadedEvents/2, 1), OnlyListener: ListenerAfter})
}
