package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/patchflow/patchflow/proving/platform"
)

// nemesisStallBound bounds how long after a fault healed the group may
// take to move every partition that was behind: a member's session timeout
// in the suite (3 s) for the group to see a stopped or cut-off member go,
// the rebalance and the claims' start (their commit metadata read, up to
// 5 s, usually milliseconds), sarama's retry backoff on a partition whose
// leader moved (2 s) and its metadata refresh, the listeners' retry backoff
// (at most 2 s in the suite), and PostgreSQL's idle-in-transaction timeout
// (5 s) for locks a stopped listener held: 17 s, rounded up to 20.
const nemesisStallBound = 20 * time.Second

// nemesisMemoryGrowth bounds the steady listener's growth: its last
// minute's peak resident memory (and goroutines) at most this times its
// first minute's.
const nemesisMemoryGrowth = 1.2

// atRiskWindow is how far back a look counts records finished but perhaps
// not yet committed: the commit interval (100 ms) plus a look's staleness
// (250 ms), rounded up.
const atRiskWindow = 500 * time.Millisecond

// judgeNemesis adds the nemesis's figures and checks: per fault, the
// records evaluated more often than the plan asks (repeats), attributed by
// time to the fault whose window (its start to the next fault's) they fall
// in, within what the listeners held at risk in that window; the time
// after the fault healed until every partition that was behind moved, within
// nemesisStallBound; no listener exit the schedule did not cause; the
// steady listener's memory and goroutines not growing. The timeline is the
// line's details.
func judgeNemesis(r *run, line *Line) error {
	if err := judgeNoUnplannedExit(r, line); err != nil {
		return err
	}
	n := r.nemesis
	if n == nil {
		line.Problems = append(line.Problems, "the nemesis did not run")
		return nil
	}
	repeats := nemesisRepeats(r)
	line.Details = append(line.Details, fmt.Sprintf("%2s  %8s  %-17s %-44s %6s  %7s  %7s  %s",
		"#", "at", "fault", "target", "length", "repeats", "at risk", "stall after heal"))
	if before := countBefore(repeats, n.began); before > 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("%d records repeated before the first fault", before))
	}
	worstStall := time.Duration(0)
	for i, o := range n.steps {
		end := time.Now()
		if i+1 < len(n.steps) {
			end = n.steps[i+1].start
		}
		rep := countIn(repeats, o.start, end)
		stall, recovered := r.watch.stallAfter(o.healed)
		worstStall = max(worstStall, stall)
		verdict := "ok"
		switch {
		case o.err != "":
			verdict = "fault failed: " + o.err
			line.Problems = append(line.Problems, fmt.Sprintf("fault %d (%s) failed: %s", i+1, o.step.Kind, o.err))
		case rep > o.inFlight:
			verdict = "REPEATS PAST AT RISK"
			line.Problems = append(line.Problems, fmt.Sprintf("fault %d (%s, %s): %d records repeated, %d at risk", i+1, o.step.Kind, o.target, rep, o.inFlight))
		case !recovered || stall > nemesisStallBound:
			verdict = "STALLED"
			line.Problems = append(line.Problems, fmt.Sprintf("fault %d (%s, %s): partitions behind %.1fs after it healed (bound %v)", i+1, o.step.Kind, o.target, stall.Seconds(), nemesisStallBound))
		}
		line.Details = append(line.Details, fmt.Sprintf("%2d  %7.1fs  %-17s %-44s %5.1fs  %7d  %7d  %5.1fs  %s",
			i+1, o.start.Sub(n.began).Seconds(), o.step.Kind, o.target, o.healed.Sub(o.start).Seconds(), rep, o.inFlight, stall.Seconds(), verdict))
	}
	line.Figures = append(line.Figures, fmt.Sprintf("nemesis seed %d: %d faults, %d records repeated in all, worst stall after healing %.1fs (bound %v)",
		n.seed, len(n.steps), len(repeats), worstStall.Seconds(), nemesisStallBound))
	judgeMemory(n, line)
	return nil
}

// repeat is one record evaluated more often than planned, at the time of
// its first extra evaluation.
type repeat struct {
	profile string
	at      time.Time
}

// nemesisRepeats finds the records the mock evaluated more often than the
// plan asks (a record is known by its package list, which the plan gives
// each event of a host: a re-check-in with an unchanged list is planned
// twice, and counted so), each once, at its first extra evaluation.
func nemesisRepeats(r *run) []repeat {
	planned := map[string]int{}
	for _, fps := range plannedEvaluations(r.plan, r.ds, shape, nil) {
		for _, fp := range fps {
			planned[fp]++
		}
	}
	evals := r.mock.Evaluations()
	slices.SortStableFunc(evals, func(a, b platform.Evaluation) int { return a.At.Compare(b.At) })
	seen := map[string]int{}
	var out []repeat
	for _, e := range evals {
		seen[e.Profile]++
		if seen[e.Profile] == planned[e.Profile]+1 {
			out = append(out, repeat{e.Profile, e.At})
		}
	}
	return out
}

func countBefore(rs []repeat, t time.Time) int {
	n := 0
	for _, r := range rs {
		if r.at.Before(t) {
			n++
		}
	}
	return n
}

func countIn(rs []repeat, from, to time.Time) int {
	n := 0
	for _, r := range rs {
		if !r.at.Before(from) && r.at.Before(to) {
			n++
		}
	}
	return n
}

// judgeMemory compares the steady listener's last minute with its first:
// its resident memory, and its goroutines at the same number of claims
// (judgeGoroutines).
func judgeMemory(n *nemesisRun, line *Line) {
	if len(n.mem) < 2 {
		line.Problems = append(line.Problems, "the steady listener's memory was not sampled")
		return
	}
	first, last := n.mem[0].at, n.mem[len(n.mem)-1].at
	var rss0, rss1 int64
	for _, m := range n.mem {
		if m.at.Sub(first) <= time.Minute {
			rss0 = max(rss0, m.rss)
		}
		if last.Sub(m.at) <= time.Minute {
			rss1 = max(rss1, m.rss)
		}
	}
	line.Figures = append(line.Figures, fmt.Sprintf("steady listener peak RSS %.0f MB in the first minute, %.0f MB in the last",
		float64(rss0)/(1<<20), float64(rss1)/(1<<20)))
	line.Figures = append(line.Figures, "steady listener peak RSS by slice of the run: "+rssTimeline(n.mem, 6))
	if float64(rss1) > nemesisMemoryGrowth*float64(rss0) {
		line.Problems = append(line.Problems, fmt.Sprintf("the steady listener's RSS grew from %d to %d bytes (more than %.1f×)", rss0, rss1, nemesisMemoryGrowth))
	}
	judgeGoroutines(n.mem, line)
}

// judgeGoroutines looks for goroutines that grow at the same number of
// claims and the same load. A claim has goroutines of its own (sarama's
// partition consumer, the claim's feed, read-ahead and watchers), so a
// listener that went from one claim to four has more for good reason; and
// each record in flight may hold one (its handler's call: seed 516948308's
// last minute, a database outage holding records, had 52 more at the same
// three claims), so the records in flight at each sample are taken off. A
// leak shows as more at a count it held before. For each number of claims the listener held both
// early and late in the run (first and last sample at that count at least
// half the run apart), the peak within a minute of the first sample at
// that count against the peak within a minute of the last. Not at none:
// a member out of the group is joining it, with connections (to brokers,
// to its dependencies) that come and go, and no claim to leak through. No
// such count: said, not judged.
func judgeGoroutines(mem []memSample, line *Line) {
	if len(mem) < 2 {
		return
	}
	run := mem[len(mem)-1].at.Sub(mem[0].at)
	byClaims := map[int][]memSample{}
	for _, m := range mem {
		byClaims[m.claims] = append(byClaims[m.claims], m)
	}
	var compared []string
	for _, c := range slices.Sorted(maps.Keys(byClaims)) {
		ms := byClaims[c]
		from, to := ms[0].at, ms[len(ms)-1].at
		if c == 0 || to.Sub(from) < run/2 {
			continue
		}
		g0, g1 := 0, 0
		for _, m := range ms {
			g := max(m.goroutines-m.inFlight, 0)
			if m.at.Sub(from) <= time.Minute {
				g0 = max(g0, g)
			}
			if to.Sub(m.at) <= time.Minute {
				g1 = max(g1, g)
			}
		}
		compared = append(compared, fmt.Sprintf("%d at %d claims, then %d (less the records in flight)", g0, c, g1))
		if float64(g1) > nemesisMemoryGrowth*float64(g0) {
			line.Problems = append(line.Problems, fmt.Sprintf("the steady listener's goroutines at %d claims grew from %d to %d (more than %.1f×)", c, g0, g1, nemesisMemoryGrowth))
		}
	}
	if len(compared) == 0 {
		line.Figures = append(line.Figures, "steady listener goroutines not judged: it held no number of claims both early and late in the run")
		return
	}
	line.Figures = append(line.Figures, "steady listener goroutines "+strings.Join(compared, "; "))
}

// progressPoint is one look at the group's progress: per partition, the
// committed offset and the end.
type progressPoint struct {
	at              time.Time
	committed, ends map[int32]int64
}

// stallAfter returns how long after healed every partition behind its end
// at that moment had its committed offset move; recovered is false when
// one never did before the run's last look.
func (w *watch) stallAfter(healed time.Time) (stall time.Duration, recovered bool) {
	i, _ := slices.BinarySearchFunc(w.history, healed, func(p progressPoint, t time.Time) int { return p.at.Compare(t) })
	if i >= len(w.history) {
		return 0, true
	}
	at := w.history[i]
	behind := map[int32]int64{}
	for part, end := range at.ends {
		if c := at.committed[part]; c < end {
			behind[part] = c
		}
	}
	for _, p := range w.history[i:] {
		for part, c := range behind {
			if p.committed[part] > c {
				delete(behind, part)
			}
		}
		if len(behind) == 0 {
			return p.at.Sub(healed), true
		}
	}
	return w.history[len(w.history)-1].at.Sub(healed), false
}

// record keeps one look's progress for stallAfter.
func (w *watch) record(at time.Time, committed, ends map[int32]int64) {
	w.history = append(w.history, progressPoint{at: at, committed: maps.Clone(committed), ends: maps.Clone(ends)})
}

// rssTimeline is the peak RSS of each of n equal parts of the samples'
// span, in MB: whether memory levels off (a warm-up) or keeps climbing (a
// leak) shows there, where the first and last minute alone cannot tell.
func rssTimeline(mem []memSample, n int) string {
	if len(mem) == 0 {
		return "none"
	}
	first, span := mem[0].at, mem[len(mem)-1].at.Sub(mem[0].at)
	peaks := make([]int64, n)
	for _, m := range mem {
		i := 0
		if span > 0 {
			i = min(n-1, int(int64(n)*int64(m.at.Sub(first))/int64(span)))
		}
		peaks[i] = max(peaks[i], m.rss)
	}
	parts := make([]string, 0, n)
	for _, p := range peaks {
		parts = append(parts, fmt.Sprintf("%.0f", float64(p)/(1<<20)))
	}
	return strings.Join(parts, " → ") + " MB"
}
