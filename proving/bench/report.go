package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Report is one benchmark run.
type Report struct {
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	Cores   int       `json:"cores"`
	// Members is the number of consumers of the sequential-consumers baseline.
	Members  int     `json:"members"`
	Go       string  `json:"go"`
	Settings string  `json:"settings"`
	Took     string  `json:"took"`
	Points   []Point `json:"points"`
	// EndToEnd and Memory are scenarios 4 and 5 (empty when not run).
	EndToEnd []EndToEndResult `json:"end_to_end,omitempty"`
	Memory   []MemoryResult   `json:"memory,omitempty"`
	// Pinned is scenario 5's case of a record that never finishes, and
	// Crash scenario 6: each for the listener before this issue and after,
	// side by side.
	Pinned []PinnedResult `json:"memory_pinned,omitempty"`
	Crash  []CrashResult  `json:"crash_replay,omitempty"`
	// Postgres is what the end-to-end scenario's server had in force (nil:
	// not run).
	Postgres *PostgresSettings `json:"postgres,omitempty"`
	// Reads is scenario 7: the reads of a patch service before and after
	// the storage change (nil when not run).
	Reads *ReadsResult `json:"reads,omitempty"`
	// Adaptive is scenario 8: the adaptive in-flight limit against a
	// downstream with a capacity (nil when not run).
	Adaptive *AdaptiveResult `json:"adaptive,omitempty"`
	// Start is scenario 9: the adaptive limit's start against the best
	// fixed limit's (nil when not run).
	Start *StartResult `json:"start,omitempty"`
	// Hostile is scenario 10: the listener on hostile records, batches and
	// answers, before and after bounding them by bytes (empty: not run).
	Hostile []HostileResult `json:"hostile,omitempty"`
	// Effects is scenario 11: the listener end to end with the outbox's
	// messages on and off, in turn.
	Effects []EndToEndResult `json:"effects,omitempty"`
	// Peer is scenario 12: the consumer library and Parallel Consumer on
	// the same workloads (empty: not run).
	Peer []PeerResult `json:"peer,omitempty"`
	// Load is how busy the machine was during the run (nil: not sampled).
	Load *Load `json:"load,omitempty"`
	// Updates are later runs that measured some scenarios again and
	// replaced their sections (cmd/bench -merge), oldest first.
	Updates []Update `json:"updates,omitempty"`
	// Versions of what was measured.
	Versions map[string]string `json:"versions"`
}

// NewReport describes the machine.
func NewReport(settings string) *Report {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	versions := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/IBM/sarama", "github.com/asynkron/protoactor-go", "github.com/twmb/franz-go/pkg/kfake", "github.com/lib/pq":
				versions[d.Path] = d.Version
			}
		}
	}
	return &Report{Started: time.Now().UTC(), Machine: fmt.Sprintf("%d cores, %s", runtime.NumCPU(), cpu), Cores: runtime.NumCPU(), Go: runtime.Version(),
		Settings: settings, Versions: versions}
}

// Update is a later run that replaced some scenarios' sections.
type Update struct {
	Scenarios []string  `json:"scenarios"`
	Started   time.Time `json:"started"`
	Took      string    `json:"took"`
	Load      *Load     `json:"load,omitempty"`
}

// Merge replaces the sections of r that the scenarios of later measured
// (core, end-to-end, memory, pinned, crash-replay, reads, adaptive: the
// names of cmd/bench -only) with later's, and records the update.
func (r *Report) Merge(later *Report, scenarios []string) error {
	for _, s := range scenarios {
		switch s {
		case "core":
			r.Points = later.Points
		case "end-to-end":
			r.EndToEnd, r.Postgres = later.EndToEnd, later.Postgres
		case "memory":
			r.Memory = later.Memory
		case "pinned":
			r.Pinned = later.Pinned
		case "crash-replay":
			r.Crash = later.Crash
		case "reads":
			r.Reads = later.Reads
		case "adaptive":
			r.Adaptive = later.Adaptive
		case "start":
			r.Start = later.Start
		case "hostile":
			r.Hostile = later.Hostile
		case "effects":
			r.Effects = later.Effects
		case "peer":
			r.Peer = later.Peer
		default:
			return fmt.Errorf("merge: unknown scenario %q", s)
		}
	}
	for k, v := range later.Versions {
		r.Versions[k] = v
	}
	// An earlier update whose every scenario this one measured again says
	// nothing of the report any more.
	r.Updates = slices.DeleteFunc(r.Updates, func(u Update) bool {
		return !slices.ContainsFunc(u.Scenarios, func(s string) bool { return !slices.Contains(scenarios, s) })
	})
	r.Updates = append(r.Updates, Update{Scenarios: scenarios, Started: later.Started, Took: later.Took, Load: later.Load})
	return nil
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteJSON writes the raw results.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// pick returns the points of scenario (and design and broker, when not
// empty) ordered by latency, then concurrency.
func (r *Report) pick(scenario, design, broker string) []Point {
	var out []Point
	for _, p := range r.Points {
		if p.Scenario == scenario && (design == "" || p.Design == design) && (broker == "" || p.Broker == broker) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].LatencyMS != out[j].LatencyMS {
			return out[i].LatencyMS < out[j].LatencyMS
		}
		return out[i].Concurrency < out[j].Concurrency
	})
	return out
}

func (r *Report) find(scenario, design, broker string, latencyMS float64, concurrency int) *Point {
	for i := range r.Points {
		p := &r.Points[i]
		if p.Scenario == scenario && p.Design == design && p.Broker == broker && p.LatencyMS == latencyMS && p.Concurrency == concurrency {
			return p
		}
	}
	return nil
}

// WritePlot draws records/s against total concurrency (log-log) on the real
// broker when it was measured, else the in-process one: one line per
// latency, its ideal as a dashed line, and the sequential baselines as
// squares (one record at a time per partition) and triangles (several
// sequential consumers). It writes nothing when no latency point exists.
func (r *Report) WritePlot(path string) error {
	brokers := r.brokers()
	if len(r.pick(ScenarioLatency, DesignActors, "")) == 0 {
		return nil
	}
	broker := brokers[len(brokers)-1]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("patchflow: records/s against total concurrency (broker: %s)", broker)
	p.X.Label.Text = "total concurrency C (records in flight)"
	p.Y.Label.Text = "records/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	colors := []color.Color{color.RGBA{R: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{B: 200, A: 255}}
	var ls []float64
	for _, pt := range r.pick(ScenarioLatency, DesignActors, broker) {
		if !slices.Contains(ls, pt.LatencyMS) {
			ls = append(ls, pt.LatencyMS)
		}
	}
	for i, l := range ls {
		var measured, ideal plotter.XYs
		for _, pt := range r.pick(ScenarioLatency, DesignActors, broker) {
			if pt.LatencyMS == l && pt.PerSecond > 0 {
				measured = append(measured, plotter.XY{X: float64(pt.Concurrency), Y: pt.PerSecond})
				ideal = append(ideal, plotter.XY{X: float64(pt.Concurrency), Y: pt.Ideal})
			}
		}
		if len(measured) == 0 {
			continue
		}
		c := colors[i%len(colors)]
		line, points, err := plotter.NewLinePoints(measured)
		if err != nil {
			return err
		}
		line.Color, points.Color = c, c
		il, err := plotter.NewLine(ideal)
		if err != nil {
			return err
		}
		il.Color, il.Dashes = c, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line, points, il)
		p.Legend.Add(fmt.Sprintf("actors, L = %.0f ms", l), line, points)
		p.Legend.Add(fmt.Sprintf("ideal C / L, %.0f ms", l), il)
		for _, b := range r.pick(ScenarioBaseline, "", broker) {
			if b.LatencyMS != l || b.PerSecond <= 0 || b.Design == DesignSequentialSyncCommit {
				continue
			}
			s, err := plotter.NewScatter(plotter.XYs{{X: float64(b.Concurrency), Y: b.PerSecond}})
			if err != nil {
				return err
			}
			s.Color, s.Radius = c, vg.Points(4)
			s.Shape = draw.BoxGlyph{}
			label := "one at a time per partition"
			if b.Design == DesignSequentialConsumers {
				s.Shape, label = draw.TriangleGlyph{}, "4 sequential consumers"
			}
			p.Add(s)
			p.Legend.Add(fmt.Sprintf("%s, %.0f ms", label, l), s)
		}
	}
	return p.Save(10*vg.Inch, 7*vg.Inch, path)
}
