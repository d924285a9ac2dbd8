package bench

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The pass marks of scenario 8 and of the end-to-end comparison.
const (
	adaptiveThroughputOfBest = 0.95 // × the best fixed C's records/s
	adaptiveMeanHandlerOfL   = 1.5  // × L, mean handler time
	settleWithin             = 10.0 // seconds after a capacity change
	settledThroughputOfBest  = 0.9  // × that capacity's best fixed C
	settledP99OfL            = 5.0  // × L, handler p99 after settling
	endToEndP50OfUnloaded    = 2.0  // × the unloaded handler p50
)

// bestFixed returns the sweep's fixed point with the most records/s at
// capacity k.
func (a *AdaptiveResult) bestFixed(k int) (AdaptivePoint, bool) {
	var best AdaptivePoint
	found := false
	for _, pt := range a.Sweep {
		if pt.Mode == "fixed" && pt.Capacity == k && (!found || pt.PerSecond > best.PerSecond) {
			best, found = pt, true
		}
	}
	return best, found
}

// adaptivePoint returns the sweep's adaptive point of law at capacity k.
func (a *AdaptiveResult) adaptivePoint(k int, law string) (AdaptivePoint, bool) {
	for _, pt := range a.Sweep {
		if pt.Mode == "adaptive" && pt.Capacity == k && pt.Law == law {
			return pt, true
		}
	}
	return AdaptivePoint{}, false
}

// sweepCapacity is the capacity of the sweep (its first point's).
func (a *AdaptiveResult) sweepCapacity() int {
	if len(a.Sweep) == 0 {
		return 0
	}
	return a.Sweep[0].Capacity
}

// stepPasses reports whether a capacity step met its marks.
func (c *CapacityChange) stepPasses(st CapacityStep) bool {
	return st.SettledAfter >= 0 && st.SettledAfter <= settleWithin && st.PerSecond >= settledThroughputOfBest*st.BestFixedPerSecond &&
		st.HandlerP99 <= settledP99OfL*c.Service
}

func (r *Report) adaptiveTargets() [][4]string {
	var rows [][4]string
	if a := r.Adaptive; a != nil {
		k := a.sweepCapacity()
		best, okBest := a.bestFixed(k)
		ad, okAd := a.adaptivePoint(k, "gradient")
		if okBest && okAd {
			ok := ad.PerSecond >= adaptiveThroughputOfBest*best.PerSecond && ad.HandlerMean <= adaptiveMeanHandlerOfL*ad.Service
			rows = append(rows, [4]string{fmt.Sprintf("8. adaptive limit, K = %d, L = %.0f ms (%s)", k, ad.Service, ad.Broker),
				fmt.Sprintf("≥ %.2f × the best fixed C's records/s, mean handler ≤ %.1f × L", adaptiveThroughputOfBest, adaptiveMeanHandlerOfL),
				fmt.Sprintf("%.0f records/s against %.0f at fixed C = %d (%.3f ×); mean handler %.1f ms (%.2f × L; fixed C = %d: %.1f ms)",
					ad.PerSecond, best.PerSecond, best.Concurrency, ad.PerSecond/best.PerSecond, ad.HandlerMean, ad.HandlerMean/ad.Service,
					a.largestFixed(k).Concurrency, a.largestFixed(k).HandlerMean),
				metText(ok)})
		}
		for _, c := range a.Changes {
			all := len(c.Steps) > 0
			var parts []string
			for _, st := range c.Steps {
				all = all && c.stepPasses(st)
				parts = append(parts, fmt.Sprintf("K = %d: %s, %.0f records/s (%.2f × C = K), p99 %.0f ms", st.Capacity, settledText(st.SettledAfter), st.PerSecond,
					st.PerSecond/max(st.BestFixedPerSecond, 1e-9), st.HandlerP99))
			}
			rows = append(rows, [4]string{fmt.Sprintf("8. capacity change, %s (%s)", c.Law, c.Broker),
				fmt.Sprintf("within %.0f s of each change the limit is within ±50 %% of the best fixed C, throughput ≥ %.1f × that C's, handler p99 ≤ %.0f × L", settleWithin, settledThroughputOfBest, settledP99OfL),
				strings.Join(parts, "; "), metText(all)})
		}
	}
	if ad := r.endToEndAt(ListenerAfter, WorkloadNewHosts, ConfigDefault); ad != nil && ad.Concurrency == "adaptive" {
		best, unloaded := r.bestFixedEndToEnd(), r.endToEndAt(ListenerAfter, WorkloadNewHosts, ConfigUnloaded)
		if best != nil && unloaded != nil {
			meets := func(e *EndToEndResult) bool {
				return e.PerSecond >= adaptiveThroughputOfBest*best.PerSecond && e.HandlerP50MS <= endToEndP50OfUnloaded*unloaded.HandlerP50MS
			}
			// Whether any fixed setting of the same run met both says
			// whether the target is within reach on this machine.
			var fixed []string
			for _, e := range r.fixedEndToEnd() {
				if meets(e) {
					fixed = append(fixed, fmt.Sprintf("%s (%.2f ×, p50 %.2f ×)", e.Name, e.PerSecond/best.PerSecond, e.HandlerP50MS/unloaded.HandlerP50MS))
				}
			}
			if len(fixed) == 0 {
				fixed = []string{"none"}
			}
			rows = append(rows, [4]string{"8. adaptive limit end to end (new hosts)",
				fmt.Sprintf("≥ %.2f × the best fixed setting's systems/s, handler p50 ≤ %.0f × unloaded", adaptiveThroughputOfBest, endToEndP50OfUnloaded),
				fmt.Sprintf("%.1f systems/s against %.1f at %s (%.2f ×); handler p50 %.0f ms against %.0f unloaded (%.2f ×); fixed settings of the run meeting both: %s",
					ad.PerSecond, best.PerSecond, best.Name, ad.PerSecond/best.PerSecond, ad.HandlerP50MS, unloaded.HandlerP50MS, ad.HandlerP50MS/unloaded.HandlerP50MS,
					strings.Join(fixed, ", ")),
				metText(meets(ad))})
		}
	}
	return rows
}

// largestFixed is the sweep's fixed point with the largest C at capacity k.
func (a *AdaptiveResult) largestFixed(k int) AdaptivePoint {
	var out AdaptivePoint
	for _, pt := range a.Sweep {
		if pt.Mode == "fixed" && pt.Capacity == k && pt.Concurrency > out.Concurrency {
			out = pt
		}
	}
	return out
}

// fixedEndToEnd are this listener's fixed configurations on new hosts, the
// one-at-a-time ones (sequential, unloaded) aside.
func (r *Report) fixedEndToEnd() []*EndToEndResult {
	var out []*EndToEndResult
	for i := range r.EndToEnd {
		e := &r.EndToEnd[i]
		if e.Listener == ListenerAfter && e.Workload == WorkloadNewHosts && e.Concurrency == "fixed" && e.Name != ConfigUnloaded && e.Name != "sequential" {
			out = append(out, e)
		}
	}
	return out
}

// bestFixedEndToEnd is the fastest of fixedEndToEnd.
func (r *Report) bestFixedEndToEnd() *EndToEndResult {
	var best *EndToEndResult
	for _, e := range r.fixedEndToEnd() {
		if best == nil || e.PerSecond > best.PerSecond {
			best = e
		}
	}
	return best
}

func (r *Report) adaptiveTables(b *strings.Builder) {
	a := r.Adaptive
	if a == nil || len(a.Sweep) == 0 {
		return
	}
	pt := a.Sweep[0]
	fmt.Fprintf(b, "\n## 8. Adaptive concurrency\n\nThe actor pipeline behind the real bridge (%d partitions, key ordering, a key per record, broker: %s), with the listener's simulated handler in front of a downstream of capacity **K**: at most K calls served at once, each for **L** = %.0f ms, the rest queued first come first served (`cmd/internal/downstream`), the queueing counted in the handler's time as it is for a database pool or a loaded VMaaS. "+
		"**fixed** runs hold the process-wide limit at C (S = C / partitions); **adaptive** ones start at 32 with G = %d as the ceiling (S = G / partitions) and one of the control laws (`actors/limit`). Each point runs %v, then measures %v: records/s over the window, the handler's mean and p99 over the attempts that ended in it, the limit averaged over samples every 50 ms.\n\n",
		r.partitionsOr(8), pt.Broker, pt.Service, a.ceiling(), r.adaptiveWarmup(), r.adaptiveMeasure())
	b.WriteString("| K | mode | law | C or G | records/s | × best fixed | handler mean ms | × L | handler p99 ms | mean limit |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pt := range a.Sweep {
		best, _ := a.bestFixed(pt.Capacity)
		fmt.Fprintf(b, "| %d | %s | %s | %d | %.0f | %.3f | %.1f | %.2f | %.1f | %.1f |\n", pt.Capacity, pt.Mode, pt.Law, pt.Concurrency, pt.PerSecond,
			pt.PerSecond/max(best.PerSecond, 1e-9), pt.HandlerMean, pt.HandlerMean/pt.Service, pt.HandlerP99, pt.MeanLimit)
	}
	if len(a.Changes) > 0 {
		c := a.Changes[0]
		fmt.Fprintf(b, "\n### Capacity change\n\nOne run per control law (G = %d) while the downstream's capacity steps through the capacities below, %.0f s each (`Capacity.SetLimit` at run time). **settled after** is how long after the change the limit entered ±50 %% of the best fixed C for the new capacity (K: the sweep shows throughput flat and latency climbing past it) and stayed there to the step's end; the rest is measured from %.0f s after the change to the step's end, against fixed C = K at that capacity measured above.\n\n",
			a.ceiling(), c.Step, c.Settle)
		b.WriteString("| law | K | limit within ±50 % of K | records/s | fixed C = K records/s | × | handler p99 ms | × L | mean limit | |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range a.Changes {
			for _, st := range c.Steps {
				fmt.Fprintf(b, "| %s | %d | %s | %.0f | %.0f | %.2f | %.1f | %.2f | %.1f | %s |\n", c.Law, st.Capacity, settledText(st.SettledAfter), st.PerSecond, st.BestFixedPerSecond,
					st.PerSecond/max(st.BestFixedPerSecond, 1e-9), st.HandlerP99, st.HandlerP99/c.Service, st.MeanLimit, metText(c.stepPasses(st)))
			}
		}
		b.WriteString("\n![the adaptive limit and the records in flight while the capacity changes](adaptive.png)\n")
	}
}

// settledText says when a step settled: "settled in N s", or that it did
// not settle within the step.
func settledText(after float64) string {
	if after < 0 {
		return "did not settle"
	}
	return fmt.Sprintf("settled in %.1f s", after)
}

func (a *AdaptiveResult) ceiling() int {
	for _, pt := range a.Sweep {
		if pt.Mode == "adaptive" {
			return pt.Concurrency
		}
	}
	return 0
}

func (r *Report) partitionsOr(def int) int {
	for _, p := range r.Points {
		return p.Partitions
	}
	for _, e := range r.EndToEnd {
		return e.Partitions
	}
	return def
}

func (r *Report) adaptiveWarmup() string  { return r.adaptiveWindow(0) }
func (r *Report) adaptiveMeasure() string { return r.adaptiveWindow(1) }

func (r *Report) adaptiveWindow(i int) string {
	if r.Adaptive == nil || r.Adaptive.Window == nil {
		return "?"
	}
	return []string{r.Adaptive.Window.Warmup.String(), r.Adaptive.Window.Measure.String()}[i]
}

// WriteAdaptivePlot draws the capacity-change run: the limit, the records
// in flight and the capacity over time. It writes nothing when the run is
// absent.
func (r *Report) WriteAdaptivePlot(path string) error {
	if r.Adaptive == nil || len(r.Adaptive.Changes) == 0 || len(r.Adaptive.Changes[0].Timeline) == 0 {
		return nil
	}
	c := r.Adaptive.Changes[0]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("patchflow: the adaptive limit (%s) while the downstream's capacity changes (L = %.0f ms, broker: %s)", c.Law, c.Service, c.Broker)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "records"
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	var lim, inFlight, capacity plotter.XYs
	for _, s := range c.Timeline {
		lim = append(lim, plotter.XY{X: s.T, Y: float64(s.Limit)})
		inFlight = append(inFlight, plotter.XY{X: s.T, Y: float64(s.InFlight)})
		capacity = append(capacity, plotter.XY{X: s.T, Y: float64(s.Capacity)})
	}
	for _, l := range []struct {
		xy    plotter.XYs
		name  string
		color color.Color
		dash  bool
	}{
		{capacity, "capacity K (the best fixed C)", color.RGBA{A: 255}, true},
		{lim, "adaptive limit", color.RGBA{R: 200, A: 255}, false},
		{inFlight, "records in flight", color.RGBA{B: 200, A: 255}, false},
	} {
		line, err := plotter.NewLine(l.xy)
		if err != nil {
			return err
		}
		line.Color = l.color
		if l.dash {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}
