package bench

import (
	"fmt"
	"image/color"
	"slices"
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

// lawText names an adaptive point's law, and its tolerance when over 1.
func (pt AdaptivePoint) lawText() string {
	if pt.Tolerance > 1 {
		return fmt.Sprintf("%s, tolerance %g", pt.Law, pt.Tolerance)
	}
	return pt.Law
}

// lawText names a capacity-change run's law, and its tolerance when over 1.
func (c *CapacityChange) lawText() string {
	return AdaptivePoint{Law: c.Law, Tolerance: c.Tolerance}.lawText()
}

// adaptivePoint returns the sweep's adaptive point of law at capacity k, at
// the default tolerance.
func (a *AdaptiveResult) adaptivePoint(k int, law string) (AdaptivePoint, bool) {
	for _, pt := range a.Sweep {
		if pt.Mode == "adaptive" && pt.Capacity == k && pt.Law == law && pt.Tolerance <= 1 {
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
			rows = append(rows, [4]string{fmt.Sprintf("8. capacity change, %s (%s)", c.lawText(), c.Broker),
				fmt.Sprintf("within %.0f s of each change the limit is within ±50 %% of the best fixed C, throughput ≥ %.1f × that C's, handler p99 ≤ %.0f × L", settleWithin, settledThroughputOfBest, settledP99OfL),
				strings.Join(parts, "; "), metText(all)})
		}
	}
	if ad := r.adaptiveEndToEnd(); ad != nil {
		best, unloaded := r.bestFixedEndToEnd(), r.endToEndRuns(ConfigUnloaded)
		if best != nil && unloaded != nil {
			bestRate, unloadedP50 := best.medianPerSecond(), unloaded.medianP50()
			meets := func(g *e2eRuns) bool {
				return g.medianPerSecond() >= adaptiveThroughputOfBest*bestRate && g.medianP50() <= endToEndP50OfUnloaded*unloadedP50
			}
			// Whether any fixed setting of the same run met both says
			// whether the target is within reach on this machine.
			var fixed []string
			for _, g := range r.fixedEndToEnd() {
				if meets(g) {
					fixed = append(fixed, fmt.Sprintf("%s (%.2f ×, p50 %.2f ×)", g.name, g.medianPerSecond()/bestRate, g.medianP50()/unloadedP50))
				}
			}
			if len(fixed) == 0 {
				fixed = []string{"none"}
			}
			row := func(title string, g *e2eRuns) [4]string {
				var of string
				if n := len(g.runs); n > 1 {
					of = fmt.Sprintf("medians of %d rounds: ", n)
				}
				return [4]string{title,
					fmt.Sprintf("≥ %.2f × the best fixed setting's systems/s, handler p50 ≤ %.0f × unloaded", adaptiveThroughputOfBest, endToEndP50OfUnloaded),
					fmt.Sprintf("%s%.1f systems/s against %.1f at %s (%.2f ×); handler p50 %.0f ms against %.0f unloaded (%.2f ×); fixed settings of the run meeting both: %s",
						of, g.medianPerSecond(), bestRate, best.name, g.medianPerSecond()/bestRate, g.medianP50(), unloadedP50, g.medianP50()/unloadedP50,
						strings.Join(fixed, ", ")),
					metText(meets(g))}
			}
			rows = append(rows, row("8. adaptive limit end to end (new hosts)", ad))
			for _, g := range r.tolerantEndToEnd() {
				rows = append(rows, row(fmt.Sprintf("8. adaptive limit end to end, tolerance %g (new hosts)", g.runs[0].Tolerance), g))
			}
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

// e2eRuns are the runs of one configuration in the adaptive comparison
// (this listener, new hosts), one per round, in run order.
type e2eRuns struct {
	name string
	runs []*EndToEndResult
}

func (g *e2eRuns) medianPerSecond() float64 {
	return median(g.runs, func(e *EndToEndResult) float64 { return e.PerSecond })
}

func (g *e2eRuns) medianP50() float64 {
	return median(g.runs, func(e *EndToEndResult) float64 { return e.HandlerP50MS })
}

// median of f over runs: the nearest-rank p50 the reads scenario takes too
// (the lower middle of an even count).
func median(runs []*EndToEndResult, f func(*EndToEndResult) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	v := make([]float64, len(runs))
	for i, e := range runs {
		v[i] = f(e)
	}
	slices.Sort(v)
	return percentile(v, 0.5)
}

// compared reports whether e is one of this listener's new-host runs, the
// sequential design aside: the runs the adaptive comparison is made of.
func compared(e *EndToEndResult) bool {
	return e.Listener == ListenerAfter && e.Workload == WorkloadNewHosts && e.Name != "sequential"
}

// endToEndRuns returns the runs of the comparison named name (nil when none
// ran).
func (r *Report) endToEndRuns(name string) *e2eRuns {
	g := &e2eRuns{name: name}
	for i := range r.EndToEnd {
		if e := &r.EndToEnd[i]; compared(e) && e.Name == name {
			g.runs = append(g.runs, e)
		}
	}
	if len(g.runs) == 0 {
		return nil
	}
	return g
}

// adaptiveEndToEnd returns the adaptive limit's runs: those of the
// adaptive configuration, or in a report from before the comparison ran in
// rounds, the default one when it ran adaptive (nil when neither did).
func (r *Report) adaptiveEndToEnd() *e2eRuns {
	if g := r.endToEndRuns(ConfigAdaptive); g != nil {
		return g
	}
	if g := r.endToEndRuns(ConfigDefault); g != nil && g.runs[0].Concurrency == "adaptive" {
		return g
	}
	return nil
}

// fixedEndToEnd returns the comparison's fixed settings, the
// one-at-a-time one (unloaded) aside, in the order they first ran.
func (r *Report) fixedEndToEnd() []*e2eRuns {
	return r.groupEndToEnd(func(e *EndToEndResult) bool { return e.Concurrency == "fixed" && e.Name != ConfigUnloaded })
}

// tolerantEndToEnd returns the comparison's adaptive configurations run at
// a tolerance set for them (TolerantTolerances), in the order they first
// ran; never the default's, whose runs leave the tolerance unset.
func (r *Report) tolerantEndToEnd() []*e2eRuns {
	return r.groupEndToEnd(func(e *EndToEndResult) bool { return e.Concurrency == "adaptive" && e.Tolerance != 0 })
}

// groupEndToEnd groups the comparison's runs that keep holds by
// configuration, in the order each first ran.
func (r *Report) groupEndToEnd(keep func(*EndToEndResult) bool) []*e2eRuns {
	var out []*e2eRuns
	byName := map[string]*e2eRuns{}
	for i := range r.EndToEnd {
		e := &r.EndToEnd[i]
		if !compared(e) || !keep(e) {
			continue
		}
		g := byName[e.Name]
		if g == nil {
			g = &e2eRuns{name: e.Name}
			byName[e.Name] = g
			out = append(out, g)
		}
		g.runs = append(g.runs, e)
	}
	return out
}

// bestFixedEndToEnd is the fixed setting of fixedEndToEnd with the most
// systems/s (its median over the rounds).
func (r *Report) bestFixedEndToEnd() *e2eRuns {
	var best *e2eRuns
	for _, g := range r.fixedEndToEnd() {
		if best == nil || g.medianPerSecond() > best.medianPerSecond() {
			best = g
		}
	}
	return best
}

// compareRounds is how many rounds the adaptive comparison ran in (0 in a
// report from before it ran in rounds).
func (r *Report) compareRounds() int {
	n := 0
	for _, e := range r.EndToEnd {
		n = max(n, e.Round)
	}
	return n
}

// roundsText says how the comparison ran, for the section's description:
// what the runs recorded, so that a report from before a change to how they
// run (-from-json) is not described as if made after it.
func (r *Report) roundsText() string {
	n := r.compareRounds()
	if n == 0 {
		return ""
	}
	events, forgotten := 0, true
	for _, e := range r.EndToEnd {
		if e.Round > 0 {
			forgotten = forgotten && e.HostsForgotten
			if e.Name == ConfigAdaptive {
				events = e.Events
			}
		}
	}
	text := fmt.Sprintf(". These run in %d rounds, interleaved, each round starting one configuration further on than the last, since the machine's drift moves one run's systems/s by a tenth or more; the targets take each one's median over the rounds (below the table)", n)
	if n == 1 {
		text = ". These run once each, in turn"
	}
	text += fmt.Sprintf(". Each but the unloaded one handles %d events over half as many hosts", events)
	if forgotten {
		text += "; before each, the hosts the runs before it stored are deleted (`TRUNCATE system, deleted_system, remediation_state, outbox`; accounts, packages and advisories stay), so that each starts on the same database, not on one the runs before it grew"
	}
	return text
}

// compareTable lists each configuration of the adaptive comparison over its
// rounds: the medians the targets take, and each round's figure.
func (r *Report) compareTable(b *strings.Builder) {
	if r.compareRounds() < 2 {
		return
	}
	groups := append(r.tolerantEndToEnd(), r.fixedEndToEnd()...)
	if ad := r.adaptiveEndToEnd(); ad != nil {
		groups = append([]*e2eRuns{ad}, groups...)
	}
	if u := r.endToEndRuns(ConfigUnloaded); u != nil {
		groups = append(groups, u)
	}
	b.WriteString("\nThe adaptive comparison over its rounds (each round's figure in run order):\n\n" +
		"| configuration | runs | systems/s: median | each round | handler p50 ms: median | each round | mean limit: each round |\n|---|---|---|---|---|---|---|\n")
	each := func(g *e2eRuns, f func(*EndToEndResult) string) string {
		var parts []string
		for _, e := range g.runs {
			parts = append(parts, f(e))
		}
		return strings.Join(parts, " / ")
	}
	for _, g := range groups {
		fmt.Fprintf(b, "| %s | %d | %.1f | %s | %.0f | %s | %s |\n", g.name, len(g.runs), g.medianPerSecond(),
			each(g, func(e *EndToEndResult) string { return fmt.Sprintf("%.1f", e.PerSecond) }), g.medianP50(),
			each(g, func(e *EndToEndResult) string { return fmt.Sprintf("%.0f", e.HandlerP50MS) }),
			each(g, func(e *EndToEndResult) string { return measuredText(e.MeanLimit) }))
	}
}

func (r *Report) adaptiveTables(b *strings.Builder) {
	a := r.Adaptive
	if a == nil || len(a.Sweep) == 0 {
		return
	}
	pt := a.Sweep[0]
	fmt.Fprintf(b, "\n## 8. Adaptive concurrency\n\nThe actor pipeline behind the real bridge (%d partitions, key ordering, a key per record, broker: %s), with the listener's simulated handler in front of a downstream of capacity **K**: at most K calls served at once, each for **L** = %.0f ms, the rest queued first come first served (`proving/downstream`), the queueing counted in the handler's time as it is for a database pool or a loaded VMaaS. "+
		"**fixed** runs hold the process-wide limit at C (S = C / partitions); **adaptive** ones start at 32 with G = %d as the ceiling (S = G / partitions) and one of the control laws (`actors/limit`). Each point runs %v, then measures %v: records/s over the window, the handler's mean and p99 over the attempts that ended in it, the limit averaged over samples every 50 ms.\n\n",
		r.partitionsOr(8), pt.Broker, pt.Service, a.ceiling(), r.adaptiveWarmup(), r.adaptiveMeasure())
	b.WriteString("| K | mode | law | C or G | records/s | × best fixed | handler mean ms | × L | handler p99 ms | mean limit |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pt := range a.Sweep {
		best, _ := a.bestFixed(pt.Capacity)
		fmt.Fprintf(b, "| %d | %s | %s | %d | %.0f | %.3f | %.1f | %.2f | %.1f | %.1f |\n", pt.Capacity, pt.Mode, pt.lawText(), pt.Concurrency, pt.PerSecond,
			pt.PerSecond/max(best.PerSecond, 1e-9), pt.HandlerMean, pt.HandlerMean/pt.Service, pt.HandlerP99, pt.MeanLimit)
	}
	if len(a.Changes) > 0 {
		c := a.Changes[0]
		fmt.Fprintf(b, "\n### Capacity change\n\nOne run per control law%s (G = %d) while the downstream's capacity steps through the capacities below, %.0f s each (`Capacity.SetLimit` at run time). **settled after** is how long after the change the limit entered ±50 %% of the best fixed C for the new capacity (K: the sweep shows throughput flat and latency climbing past it) and stayed there to the step's end; the rest is measured from %.0f s after the change to the step's end, against fixed C = K at that capacity measured above.\n\n",
			a.tolerantChangesText(), a.ceiling(), c.Step, c.Settle)
		b.WriteString("| law | K | limit within ±50 % of K | records/s | fixed C = K records/s | × | handler p99 ms | × L | mean limit | |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range a.Changes {
			for _, st := range c.Steps {
				fmt.Fprintf(b, "| %s | %d | %s | %.0f | %.0f | %.2f | %.1f | %.2f | %.1f | %s |\n", c.lawText(), st.Capacity, settledText(st.SettledAfter), st.PerSecond, st.BestFixedPerSecond,
					st.PerSecond/max(st.BestFixedPerSecond, 1e-9), st.HandlerP99, st.HandlerP99/c.Service, st.MeanLimit, metText(c.stepPasses(st)))
			}
		}
		b.WriteString("\n![the adaptive limit and the records in flight while the capacity changes](adaptive.png)\n")
	}
}

// tolerantChangesText names, for the capacity change's description, the
// runs at a tolerance over 1 beside the one per law ("" when the report has
// none, as reports from before them have not). Run runs them all with the
// default law.
func (a *AdaptiveResult) tolerantChangesText() string {
	var tols []string
	law := ""
	for _, c := range a.Changes {
		if c.Tolerance > 1 {
			tols, law = append(tols, fmt.Sprintf("%g", c.Tolerance)), c.Law
		}
	}
	if len(tols) == 0 {
		return ""
	}
	list := tols[len(tols)-1]
	if n := len(tols); n > 1 {
		list = strings.Join(tols[:n-1], ", ") + " and " + list
	}
	return fmt.Sprintf(", then %s at tolerance %s", law, list)
}

// tolerantText names the comparison's tolerant configurations, for the
// end-to-end description, when the report has any.
func (r *Report) tolerantText() string {
	if len(r.tolerantEndToEnd()) == 0 {
		return ""
	}
	return " **adaptive, tolerance t** the same at `LISTENER_CONCURRENCY_TOLERANCE=t`,"
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
	p.Title.Text = fmt.Sprintf("patchflow: the adaptive limit (%s) while the downstream's capacity changes (L = %.0f ms, broker: %s)", c.lawText(), c.Service, c.Broker)
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
