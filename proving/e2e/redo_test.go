package e2e

import (
	"reflect"
	"slices"
	"testing"

	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// calls builds the mock's record: each argument is "process:profile".
func calls(spec ...string) []platform.Evaluation {
	var out []platform.Evaluation
	for _, s := range spec {
		out = append(out, platform.Evaluation{Caller: s[:2], Profile: s[3:]})
	}
	return out
}

func TestAttributeEvaluations(t *testing.T) {
	procs := []string{"p0", "p1", "p2"}
	for _, tc := range []struct {
		name        string
		planned     map[string][]string
		calls       []platform.Evaluation
		redone      []int
		repeats     int
		unevaluated int
		unplanned   int
		unmatched   int
		jumps       int
	}{
		{name: "no crash", planned: map[string][]string{"h": {"A", "B", "C"}},
			calls: calls("p0:A", "p0:B", "p0:C"), redone: []int{0, 0, 0}},
		{name: "the event in flight at the kill evaluated again", planned: map[string][]string{"h": {"A", "B", "C"}},
			calls: calls("p0:A", "p0:B", "p1:B", "p1:C"), redone: []int{1, 0, 0}, repeats: 1},
		{name: "the next event evaluates the same profile: new work", planned: map[string][]string{"h": {"A", "A", "B"}},
			calls: calls("p0:A", "p1:A", "p1:B"), redone: []int{0, 0, 0}},
		{name: "both equal events done, one again", planned: map[string][]string{"h": {"A", "A", "B"}},
			calls: calls("p0:A", "p0:A", "p1:A", "p1:B"), redone: []int{1, 0, 0}, repeats: 1},
		{name: "ambiguous: read as new work", planned: map[string][]string{"h": {"A", "A"}},
			calls: calls("p0:A", "p1:A"), redone: []int{0, 0, 0}},
		{name: "killed again before getting further", planned: map[string][]string{"h": {"A", "B", "C"}, "g": {"X"}},
			calls: calls("p0:A", "p0:B", "p0:X", "p1:B", "p2:B", "p2:C"), redone: []int{1, 1, 0}, repeats: 2},
		{name: "hosts apart", planned: map[string][]string{"h": {"A", "B"}, "g": {"X", "Y"}},
			calls: calls("p0:A", "p0:X", "p0:Y", "p1:Y", "p1:B"), redone: []int{1, 0, 0}, repeats: 1},
		{name: "a repeat inside one process is no kill's", planned: map[string][]string{"h": {"A", "B"}},
			calls: calls("p0:A", "p0:A", "p0:B"), redone: []int{0, 0, 0}, repeats: 1},
		{name: "an event never evaluated", planned: map[string][]string{"h": {"A", "B", "C"}},
			calls: calls("p0:A", "p0:C"), redone: []int{0, 0, 0}, unevaluated: 1, jumps: 1},
		{name: "unknown profile or caller", planned: map[string][]string{"h": {"A"}},
			calls: calls("p0:A", "p0:Z", "q9:A"), redone: []int{0, 0, 0}, unplanned: 2},
		{name: "out of key order", planned: map[string][]string{"h": {"A", "B"}},
			calls: calls("p0:B", "p0:A"), redone: []int{0, 0, 0}, jumps: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := attributeEvaluations(tc.planned, procs, tc.calls)
			repeats, unevaluated := l.Repeats()
			if got := l.Redone(len(procs)); !reflect.DeepEqual(got, tc.redone) {
				t.Errorf("redone %v, want %v", got, tc.redone)
			}
			if repeats != tc.repeats || unevaluated != tc.unevaluated {
				t.Errorf("repeats %d, unevaluated %d; want %d, %d", repeats, unevaluated, tc.repeats, tc.unevaluated)
			}
			if l.Unplanned != tc.unplanned || l.Jumps != tc.jumps {
				t.Errorf("unplanned %d, jumps %d; want %d, %d", l.Unplanned, l.Jumps, tc.unplanned, tc.jumps)
			}
		})
	}
}

// The suite's own stream: every planned profile belongs to one host, and
// half the events evaluate a profile another event of their host evaluates
// too (which is why attributeEvaluations goes by order, not by profile).
func TestPlannedEvaluationsOfTheCrashLoopStream(t *testing.T) {
	i := slices.IndexFunc(Scenarios(), func(s Scenario) bool { return s.Name == "crash-loop" })
	sc := Scenarios()[i]
	opts := loadgen.DefaultOptions()
	opts.Seed = uint64(len(sc.Name)*7919 + sc.Events)
	opts.Hosts, opts.Events = sc.Hosts, sc.Events
	opts.Shape, opts.Bulk = shape, false
	ds := platform.NewDataset(opts.Seed, platform.DefaultSize())
	planned := plannedEvaluations(loadgen.NewPlan(opts), ds, shape, nil)
	owner := map[string]string{}
	events, shared := 0, 0
	for host, profiles := range planned {
		seen := map[string]int{}
		for _, p := range profiles {
			if o, ok := owner[p]; ok && o != host {
				t.Fatalf("hosts %s and %s share a profile", o, host)
			}
			owner[p] = host
			seen[p]++
		}
		for _, n := range seen {
			events += n
			if n > 1 {
				shared += n
			}
		}
	}
	if events < sc.Events*9/10 || shared == 0 {
		t.Fatalf("%d evaluating events, %d sharing a profile", events, shared)
	}
	t.Logf("%d evaluating events for %d hosts, %d of them share a profile with another event of their host", events, len(planned), shared)
}
