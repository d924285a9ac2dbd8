package e2e

import (
	"reflect"
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
