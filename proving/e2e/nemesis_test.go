package e2e

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The schedule is a function of its seed and duration: the same pair
// gives the same faults (a failing seed reproduces), every fault ends
// within the duration with its budget, faults never overlap, and a long
// run draws every kind.
func TestNemesisScheduleIsReproducibleAndFits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		d := time.Duration(rapid.IntRange(0, 3600).Draw(t, "seconds")) * time.Second
		a, b := nemesisSchedule(seed, d), nemesisSchedule(seed, d)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d gave two schedules", seed)
		}
		end := time.Duration(0)
		for i, s := range a {
			budget := time.Duration(0)
			if s.Kind == nemesisNodeKill || s.Kind == nemesisNodeTerm {
				budget = 30 * time.Second
			}
			if s.At < end+nemesisGapMin {
				t.Fatalf("step %d at %v starts %v after the previous ended (want a gap of at least %v)", i, s.At, s.At-end, nemesisGapMin)
			}
			end = s.At + s.Length + budget
			if end > d {
				t.Fatalf("step %d ends at %v, past the duration %v", i, end, d)
			}
			if s.Node < 1 || s.Node > 3 || s.Listener < 0 || s.Listener > 2 {
				t.Fatalf("step %d targets node %d, listener %d", i, s.Node, s.Listener)
			}
			if lasting := s.Kind != nemesisListenerKill && s.Kind != nemesisListenerTerm && s.Kind != nemesisNodeTerm; lasting &&
				(s.Length < nemesisLengthMin || s.Length > nemesisLengthMax) {
				t.Fatalf("step %d (%s) lasts %v", i, s.Kind, s.Length)
			}
		}
	})
	kinds := map[nemesisKind]bool{}
	for _, s := range nemesisSchedule(1, 30*time.Minute) {
		kinds[s.Kind] = true
	}
	if len(kinds) != len(nemesisKinds) {
		t.Fatalf("a 30-minute schedule drew %d of the %d kinds: %v", len(kinds), len(nemesisKinds), kinds)
	}
	if !reflect.DeepEqual(nemesisSchedule(1, 5*time.Minute), nemesisSchedule(1, 30*time.Minute)[:len(nemesisSchedule(1, 5*time.Minute))]) {
		t.Fatal("a longer run of the same seed does not begin with the shorter run's faults")
	}
}

// stallAfter: the time from the heal until every partition behind at that
// moment has moved; a partition at its end does not count.
func TestStallAfterHeal(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := &watch{}
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w.record(at(0), map[int32]int64{0: 10, 1: 50}, map[int32]int64{0: 20, 1: 50})
	w.record(at(1), map[int32]int64{0: 10, 1: 50}, map[int32]int64{0: 25, 1: 60})
	w.record(at(4), map[int32]int64{0: 12, 1: 51}, map[int32]int64{0: 25, 1: 60})
	stall, ok := w.stallAfter(at(0))
	if !ok || stall != 4*time.Second {
		t.Fatalf("stall %v, %v; want 4s (partition 0, behind at the heal, moved at 4 s)", stall, ok)
	}
	w.record(at(5), map[int32]int64{0: 12, 1: 51}, map[int32]int64{0: 25, 1: 60})
	if stall, ok := w.stallAfter(at(4.5)); ok || stall != 500*time.Millisecond {
		t.Fatalf("stall %v, %v; want not recovered by the last look", stall, ok)
	}
}

// The timeline puts each sample in its part of the run and keeps each
// part's peak.
func TestRSSTimelineKeepsEachPartsPeak(t *testing.T) {
	t0 := time.Unix(0, 0)
	var mem []memSample
	for i, mb := range []int64{40, 42, 41, 50, 45, 60} { // one sample a minute
		mem = append(mem, memSample{at: t0.Add(time.Duration(i) * time.Minute), rss: mb << 20})
	}
	if got, want := rssTimeline(mem, 3), "42 → 50 → 60 MB"; got != want {
		t.Errorf("rssTimeline = %q, want %q", got, want)
	}
	if got := rssTimeline(nil, 3); got != "none" {
		t.Errorf("rssTimeline(nil) = %q, want none", got)
	}
}

// A member cut off from its coordinator marks offsets it can never commit:
// what is at risk runs from the broker's committed offset, whatever the
// listeners show as theirs, up to the highest offset any of them admitted.
func TestAtRiskCountsFromTheBrokersCommittedOffset(t *testing.T) {
	zombie := []partitionStatus{{Partition: 0, Committed: 140, Admitted: 149}}
	owner := []partitionStatus{{Partition: 0, Committed: 100, Admitted: 120}, {Partition: 1, Committed: 50, Admitted: 54}}
	committed := map[int32]int64{0: 100, 1: 50}
	if got, want := admittedAboveCommitted(committed, [][]partitionStatus{zombie, owner}), 50+5; got != want {
		t.Errorf("at risk = %d, want %d (offsets 100..149 of partition 0, 50..54 of 1)", got, want)
	}
	// No committed offset yet: everything admitted is at risk.
	if got, want := admittedAboveCommitted(nil, [][]partitionStatus{{{Partition: 3, Committed: -1, Admitted: 9}}}), 10; got != want {
		t.Errorf("at risk with nothing committed = %d, want %d", got, want)
	}
	// Nothing admitted above the committed offset: nothing at risk.
	if got := admittedAboveCommitted(map[int32]int64{0: 10}, [][]partitionStatus{{{Partition: 0, Committed: 10, Admitted: 9}, {Partition: 2, Admitted: -1}}}); got != 0 {
		t.Errorf("at risk = %d, want 0", got)
	}
}

// Goroutines are judged at the same number of claims: more claims late in
// the run are no leak, more goroutines at a count held before are.
func TestGoroutinesAreJudgedAtTheSameNumberOfClaims(t *testing.T) {
	t0 := time.Unix(0, 0)
	sample := func(minute float64, claims, goroutines int) memSample {
		return memSample{at: t0.Add(time.Duration(minute * float64(time.Minute))), rss: 40 << 20, claims: claims, goroutines: goroutines}
	}
	judge := func(mem []memSample) Line {
		var l Line
		judgeGoroutines(mem, &l)
		return l
	}
	// One claim for most of the run, four at its end: 170 → 220 is the claims.
	grew := judge([]memSample{sample(0, 1, 170), sample(1, 1, 172), sample(2, 2, 190), sample(3, 1, 174), sample(4.5, 4, 220), sample(5, 1, 175)})
	if len(grew.Problems) != 0 {
		t.Errorf("problems %q for goroutines that grew with the claims", grew.Problems)
	}
	if want := "steady listener goroutines 172 at 1 claims, then 175 (less the records in flight)"; !slices.Contains(grew.Figures, want) {
		t.Errorf("figures %q, want %q", grew.Figures, want)
	}
	// The same claims early and late, a quarter more goroutines: a leak.
	leak := judge([]memSample{sample(0, 2, 170), sample(1, 3, 180), sample(4, 2, 205), sample(5, 2, 215)})
	if len(leak.Problems) != 1 || !strings.Contains(leak.Problems[0], "at 2 claims grew from 170 to 215") {
		t.Errorf("problems %q, want the growth at 2 claims", leak.Problems)
	}
	// The same claims, more records in flight late (an outage holding
	// them): their goroutines are not a leak.
	held := sample(5, 2, 230)
	held.inFlight = 60
	busy := judge([]memSample{sample(0, 2, 170), sample(4, 2, 172), held})
	if len(busy.Problems) != 0 {
		t.Errorf("problems %q for goroutines of records in flight", busy.Problems)
	}
	held.inFlight = 0 // the same goroutines with nothing in flight: a leak
	if leaked := judge([]memSample{sample(0, 2, 170), sample(4, 2, 172), held}); len(leaked.Problems) != 1 {
		t.Errorf("problems %q, want the growth at 2 claims", leaked.Problems)
	}
	// Out of the group early and late (joining): not judged.
	out := judge([]memSample{sample(0, 0, 43), sample(1, 2, 150), sample(4, 2, 150), sample(5, 0, 63)})
	if len(out.Problems) != 0 || !slices.Contains(out.Figures, "steady listener goroutines 150 at 2 claims, then 150 (less the records in flight)") {
		t.Errorf("problems %q, figures %q; want only 2 claims judged", out.Problems, out.Figures)
	}
	// No count held both early and late: said, not judged.
	none := judge([]memSample{sample(0, 1, 170), sample(1, 1, 170), sample(4, 3, 400), sample(5, 3, 400)})
	if len(none.Problems) != 0 || len(none.Figures) != 1 || !strings.Contains(none.Figures[0], "not judged") {
		t.Errorf("problems %q, figures %q; want it said as not judged", none.Problems, none.Figures)
	}
}
