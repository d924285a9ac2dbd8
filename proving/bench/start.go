package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/limit"
)

// Scenario 9: the adaptive limit's start. A process start (a deploy, a crash,
// a scale-out) meets a backlog with the limit at 32; how soon does the
// pipeline run as fast as the best fixed limit does? Each case runs the best
// fixed limit and the default adaptive limit from the start, side by side in
// one run, on the same simulated downstream as scenario 8.

// StartCase is one downstream of scenario 9: Capacity calls served at once
// (the ceiling or more: room for every record in flight), each taking
// Service.
type StartCase struct {
	Capacity int
	Service  time.Duration
}

// StartPlan is what scenario 9 measures.
type StartPlan struct {
	Cases []StartCase
	// Ceiling is G of the adaptive runs and the fixed limit where the
	// downstream has room for it.
	Ceiling int
	// Watch is how long each run is watched from its first record; its
	// second half is the fixed limit's steady throughput. Trail is the
	// window throughput is measured over while it climbs.
	Watch, Trail time.Duration
	// MaxRecords caps a run's topic (a downstream with room at 10 ms would
	// want more records than the pipeline can take in Run).
	MaxRecords int
}

// FullStartPlan is what make bench runs: the cases issue 28 asks for.
func FullStartPlan() StartPlan {
	return StartPlan{Cases: []StartCase{{1024, 100 * time.Millisecond}, {1024, 10 * time.Millisecond}, {64, 100 * time.Millisecond}},
		Ceiling: 1024, Watch: 8 * time.Second, Trail: 500 * time.Millisecond, MaxRecords: 400_000}
}

// StartRun is one run of a case.
type StartRun struct {
	// Mode is "fixed" (Concurrency is C) or "adaptive" (Concurrency is G).
	Mode        string `json:"mode"`
	Concurrency int    `json:"concurrency"`
	// ReachedAfter is how long after the first record the records
	// finished over the trailing window first reached 0.9 × the fixed
	// run's steady rate (-1: not within the run).
	ReachedAfter float64 `json:"reached_after_s"`
	// FirstSeconds are the records finished within 1, 2 and 4 s of the
	// first.
	FirstSeconds [3]int64 `json:"first_seconds"`
	// PerSecond is the run's rate over its second half.
	PerSecond float64 `json:"records_per_second"`
}

// StartPoint is one case of scenario 9: its fixed and adaptive runs.
type StartPoint struct {
	Broker   string  `json:"broker"`
	Capacity int     `json:"capacity"`
	Service  float64 `json:"service_ms"`
	// Target is 0.9 × the fixed run's steady rate.
	Target   float64  `json:"target_records_per_second"`
	Fixed    StartRun `json:"fixed"`
	Adaptive StartRun `json:"adaptive"`
	// Unslowed is the adaptive limit without its slow start (as before
	// issue 28), in the same run.
	Unslowed StartRun `json:"adaptive_without_slow_start"`
	Trail    float64  `json:"trail_s"`
}

// StartResult is scenario 9.
type StartResult struct {
	Points []StartPoint `json:"points"`
}

// startShare is the share of the best fixed limit's throughput the adaptive
// limit must reach, and startWithin how soon (issue 28).
const (
	startShare  = 0.9
	startWithin = 2.0
)

// Run measures scenario 9 on src.
func (p StartPlan) Run(src Source, partitions int, log io.Writer) (*StartResult, error) {
	res := &StartResult{}
	for _, c := range p.Cases {
		fixedC := min(c.Capacity, p.Ceiling)
		ideal := float64(fixedC) / c.Service.Seconds()
		records := min(p.MaxRecords, int(ideal*p.Watch.Seconds()*1.3)+1000)
		pt := StartPoint{Broker: src.Name(), Capacity: c.Capacity, Service: ms(c.Service), Trail: p.Trail.Seconds()}
		fixed, err := p.watch(src, partitions, records, sweepSettings(partitions, fixedC, false, 0), c)
		if err != nil {
			return nil, fmt.Errorf("start, fixed C=%d, K=%d L=%v: %w", fixedC, c.Capacity, c.Service, err)
		}
		adaptive, err := p.watch(src, partitions, records, sweepSettings(partitions, p.Ceiling, true, limit.Gradient), c)
		if err != nil {
			return nil, fmt.Errorf("start, adaptive G=%d, K=%d L=%v: %w", p.Ceiling, c.Capacity, c.Service, err)
		}
		without := sweepSettings(partitions, p.Ceiling, true, limit.Gradient)
		without.ConcurrencySlowStart = false
		unslowed, err := p.watch(src, partitions, records, without, c)
		if err != nil {
			return nil, fmt.Errorf("start, adaptive G=%d without slow start, K=%d L=%v: %w", p.Ceiling, c.Capacity, c.Service, err)
		}
		pt.Target = startShare * fixed.steady(fixed.end(p.Watch, records))
		pt.Unslowed = unslowed.run("adaptive", p.Ceiling, pt.Target, p.Trail, unslowed.end(p.Watch, records))
		pt.Fixed = fixed.run("fixed", fixedC, pt.Target, p.Trail, fixed.end(p.Watch, records))
		pt.Adaptive = adaptive.run("adaptive", p.Ceiling, pt.Target, p.Trail, adaptive.end(p.Watch, records))
		fmt.Fprintf(log, "%-6s start     K=%-4d L=%-6v %.0f records/s (0.9 × fixed C=%d's %.0f) after: fixed %s, adaptive %s (without slow start %s); first 1/2/4 s: fixed %v, adaptive %v (without %v)\n",
			pt.Broker, c.Capacity, c.Service, pt.Target, fixedC, pt.Target/startShare, reachedText(pt.Fixed.ReachedAfter), reachedText(pt.Adaptive.ReachedAfter),
			reachedText(pt.Unslowed.ReachedAfter), pt.Fixed.FirstSeconds, pt.Adaptive.FirstSeconds, pt.Unslowed.FirstSeconds)
		res.Points = append(res.Points, pt)
	}
	return res, nil
}

// finished is when each record of a run finished, from its first.
type finished []time.Duration

// watch runs settings against c's downstream for p.Watch from the first
// record and returns when each record finished.
func (p StartPlan) watch(src Source, partitions, records int, settings actors.Settings, c StartCase) (finished, error) {
	run, err := startSimulated(src, partitions, records, settings, c.Capacity, c.Service)
	if err != nil {
		return nil, err
	}
	defer run.stop()
	run.obs.mu.Lock()
	first := run.obs.at[0]
	run.obs.mu.Unlock()
	time.Sleep(time.Until(first.Add(p.Watch)))
	run.obs.mu.Lock()
	defer run.obs.mu.Unlock()
	out := make(finished, 0, len(run.obs.at))
	for _, at := range run.obs.at {
		if d := at.Sub(first); d <= p.Watch {
			out = append(out, d)
		}
	}
	if len(run.obs.at) >= records && out[len(out)-1] < 2*time.Second {
		return nil, fmt.Errorf("the topic of %d records ran dry %v after the first record", records, out[len(out)-1])
	}
	return out, nil
}

// end is when the run's watch ended: Watch, or the last record's finish
// if the topic ran dry before (a downstream with room at 10 ms takes more
// records a second than a topic can be filled with in reasonable time).
func (f finished) end(watch time.Duration, records int) time.Duration {
	if len(f) >= records {
		return f[len(f)-1]
	}
	return watch
}

// steady is the rate over the second half of a run of length dur.
func (f finished) steady(dur time.Duration) float64 {
	n := 0
	for _, d := range f {
		if d >= dur/2 {
			n++
		}
	}
	return float64(n) / (dur / 2).Seconds()
}

// reached is the end of the first trailing window of length trail whose
// records a second reached target, stepping by 50 ms (-1: none).
func (f finished) reached(target float64, trail, dur time.Duration) time.Duration {
	const step = 50 * time.Millisecond
	lo := 0
	for end := trail; end <= dur; end += step {
		// f is in completion order: the observer appends under its lock.
		for lo < len(f) && f[lo] < end-trail {
			lo++
		}
		hi := lo
		for hi < len(f) && f[hi] < end {
			hi++
		}
		if float64(hi-lo)/trail.Seconds() >= target {
			return end
		}
	}
	return -1
}

// run sums up a run watched until dur.
func (f finished) run(mode string, c int, target float64, trail, dur time.Duration) StartRun {
	r := StartRun{Mode: mode, Concurrency: c, PerSecond: f.steady(dur), ReachedAfter: -1}
	if at := f.reached(target, trail, dur); at >= 0 {
		r.ReachedAfter = at.Seconds()
	}
	for i, s := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		for _, d := range f {
			if d <= s {
				r.FirstSeconds[i]++
			}
		}
	}
	return r
}

func reachedText(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", s)
}

// startPasses: the adaptive run reached the target within startWithin.
func (pt StartPoint) startPasses() bool {
	return pt.Adaptive.ReachedAfter >= 0 && pt.Adaptive.ReachedAfter <= startWithin
}

// startTargets is issue 28's row: the downstream with room at 100 ms.
func (r *Report) startTargets() [][4]string {
	if r.Start == nil {
		return nil
	}
	var rows [][4]string
	for _, pt := range r.Start.Points {
		if pt.Capacity < r.Start.ceiling() || pt.Service != 100 {
			continue
		}
		rows = append(rows, [4]string{fmt.Sprintf("9. adaptive start, room for G = %d, L = %.0f ms (%s)", pt.Capacity, pt.Service, pt.Broker),
			fmt.Sprintf("%.1f × the best fixed setting's records/s within %.0f s of the first record", startShare, startWithin),
			fmt.Sprintf("%.0f records/s over %.1f s windows after %s (fixed C = %d: %s)", pt.Target, pt.Trail, reachedText(pt.Adaptive.ReachedAfter),
				pt.Fixed.Concurrency, reachedText(pt.Fixed.ReachedAfter)),
			metText(pt.startPasses())})
	}
	return rows
}

// ceiling is the adaptive runs' G.
func (s *StartResult) ceiling() int {
	if len(s.Points) == 0 {
		return 0
	}
	return s.Points[0].Adaptive.Concurrency
}

func (r *Report) startTable(b *strings.Builder) {
	s := r.Start
	if s == nil || len(s.Points) == 0 {
		return
	}
	pt := s.Points[0]
	fmt.Fprintf(b, "\n## 9. The adaptive limit's start\n\nA process start (a deploy, a crash, a scale-out) against a backlog, on scenario 8's pipeline and simulated downstream (broker: %s). Each case runs the best fixed limit (C = K, or G = %d where the downstream has room for it) and the default adaptive limit (gradient, G = %d, starting at 32), and the adaptive limit without its slow start (as before issue 28) from the start, one after the other in one run. **reached after** is how long after the first record the records finished over a trailing %.1f s window first reached 0.9 × the fixed run's rate over the second half of its run; then the records finished within 1, 2 and 4 s of the first.\n\n",
		pt.Broker, s.ceiling(), s.ceiling(), pt.Trail)
	b.WriteString("| K | L ms | target records/s | reached after: fixed | adaptive | adaptive without slow start | first 1 / 2 / 4 s: fixed | adaptive | adaptive without slow start | |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pt := range s.Points {
		f, a, u := pt.Fixed.FirstSeconds, pt.Adaptive.FirstSeconds, pt.Unslowed.FirstSeconds
		fmt.Fprintf(b, "| %d | %.0f | %.0f | %s | %s | %s | %d / %d / %d | %d / %d / %d | %d / %d / %d | %s |\n", pt.Capacity, pt.Service, pt.Target,
			reachedText(pt.Fixed.ReachedAfter), reachedText(pt.Adaptive.ReachedAfter), reachedText(pt.Unslowed.ReachedAfter),
			f[0], f[1], f[2], a[0], a[1], a[2], u[0], u[1], u[2], metText(pt.startPasses()))
	}
}
