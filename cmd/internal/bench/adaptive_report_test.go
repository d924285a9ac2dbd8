package bench

import (
	"os"
	"strings"
	"testing"
)

func sampleAdaptive(adaptivePerSecond, adaptiveMean, settled float64) *AdaptiveResult {
	w := FullAdaptivePlan().Window
	fixed := func(c int, perSecond, mean float64) AdaptivePoint {
		return AdaptivePoint{Broker: "kafka", Capacity: 64, Service: 20, Mode: "fixed", Concurrency: c, PerSecond: perSecond, HandlerMean: mean, MeanLimit: float64(c)}
	}
	return &AdaptiveResult{Window: &w,
		Sweep: []AdaptivePoint{fixed(64, 3000, 21), fixed(1024, 3100, 330),
			{Broker: "kafka", Capacity: 64, Service: 20, Mode: "adaptive", Law: "gradient", Concurrency: 1024, PerSecond: adaptivePerSecond, HandlerMean: adaptiveMean, MeanLimit: 72}},
		Changes: []*CapacityChange{{Broker: "kafka", Law: "gradient", Service: 20, Step: 20, Settle: 10,
			Steps:    []CapacityStep{{Capacity: 16, BestFixed: 16, BestFixedPerSecond: 780, SettledAfter: settled, PerSecond: 770, HandlerP99: 40, MeanLimit: 20}},
			Timeline: []CapacitySample{{T: 0, Capacity: 16, Limit: 32, InFlight: 32}, {T: 1, Capacity: 16, Limit: 20, InFlight: 20}}}},
	}
}

// Scenario 8's verdicts follow the numbers: throughput under 0.95 of the
// best fixed C, a mean handler time over 1.5 × L, or a limit that settles
// later than 10 s after a change is "not met".
func TestAdaptiveTargetsFollowTheNumbers(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		perSecond, mean, settled float64
		sweepMet, changeMet      bool
	}{
		{"all met", 3050, 24, 1.5, true, true},
		{"too slow", 2900, 24, 1.5, false, true},
		{"queues too long", 3050, 31, 1.5, false, true},
		{"settles too late", 3050, 24, 11, true, false},
		{"never settles", 3050, 24, -1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleReport()
			r.Adaptive = sampleAdaptive(tc.perSecond, tc.mean, tc.settled)
			verdicts := map[string]string{}
			for _, row := range r.targets() {
				if strings.HasPrefix(row[0], "8. ") {
					verdicts[strings.SplitN(row[0], ",", 2)[0]] = row[3]
				}
			}
			want := func(met bool) string { return metText(met) }
			if got := verdicts["8. adaptive limit"]; got != want(tc.sweepMet) {
				t.Errorf("sweep verdict %q, want %q", got, want(tc.sweepMet))
			}
			if got := verdicts["8. capacity change"]; got != want(tc.changeMet) {
				t.Errorf("capacity-change verdict %q, want %q", got, want(tc.changeMet))
			}
		})
	}
}

// The end-to-end comparison is judged against the best fixed setting and
// the unloaded handler time, both measured in the same run.
func TestAdaptiveEndToEndTarget(t *testing.T) {
	r := sampleReport()
	base := r.EndToEnd[1]
	add := func(name, mode string, perSecond, p50 float64) {
		e := base
		e.Name, e.Concurrency, e.PerSecond, e.HandlerP50MS = name, mode, perSecond, p50
		r.EndToEnd = append(r.EndToEnd, e)
	}
	r.EndToEnd[1].Concurrency = "adaptive" // the default row: 80 systems/s, p50 700 ms
	r.EndToEnd[2].PerSecond = 60           // C=32, fixed: slower than fixed G=1024 below
	add(ConfigFixedDefault, "fixed", 82, 3000)
	add(ConfigUnloaded, "fixed", 9, 300)
	row := func() [4]string {
		for _, row := range r.targets() {
			if strings.HasPrefix(row[0], "8. adaptive limit end to end") {
				return row
			}
		}
		t.Fatal("no end-to-end adaptive target")
		return [4]string{}
	}
	if got := row(); got[3] != "**not met**" || !strings.HasSuffix(got[2], "meeting both: none") { // 700 ms > 2 × 300 ms; fixed G=1024 at 10 ×
		t.Fatalf("p50 at 2.3 × unloaded judged %q: %v", got[3], got)
	}
	add(ConfigFixed64, "fixed", 79, 500)
	if got := row(); got[3] != "**not met**" || !strings.HasSuffix(got[2], "meeting both: fixed G=64 (0.96 ×, p50 1.67 ×)") {
		t.Fatalf("with fixed G=64 at 79 systems/s and p50 1.7 × unloaded: %v", got)
	}
	r.EndToEnd[1].HandlerP50MS = 550
	if got := row(); got[3] != "met" {
		t.Fatalf("80 of 82 systems/s at 1.8 × unloaded judged %q: %v", got[3], got)
	}
	var b strings.Builder
	r.Adaptive = sampleAdaptive(3050, 24, 1.5)
	r.adaptiveTables(&b)
	if !strings.Contains(b.String(), "| gradient | 16 | settled in 1.5 s | 770 | 780 |") {
		t.Fatalf("capacity-change table lacks its row:\n%s", b.String())
	}
}

// The fixed settings "meeting both" are those the best fixed one is chosen
// from: this listener's, on new hosts, the one-at-a-time ones (sequential,
// unloaded) aside. Rows of the listener before, of re-check-ins and the
// one-at-a-time ones are not listed even when their numbers meet both lines.
func TestAdaptiveEndToEndListsOnlyComparableFixedSettings(t *testing.T) {
	r := sampleReport()
	r.EndToEnd[1].Concurrency = "adaptive" // the default row: 80 systems/s, p50 700 ms
	base := r.EndToEnd[1]
	add := func(name, listener, workload string, perSecond, p50 float64) {
		e := base
		e.Name, e.Listener, e.Workload, e.Concurrency, e.PerSecond, e.HandlerP50MS = name, listener, workload, "fixed", perSecond, p50
		r.EndToEnd = append(r.EndToEnd, e)
	}
	r.EndToEnd[2].PerSecond = 60 // C=32: slower than fixed G=1024 below, p50 700 ms
	add(ConfigFixedDefault, ListenerAfter, WorkloadNewHosts, 82, 3000)
	add(ConfigUnloaded, ListenerAfter, WorkloadNewHosts, 85, 300)
	add(ConfigFixed64, ListenerBefore, WorkloadNewHosts, 85, 400)
	add(ConfigFixed64, ListenerAfter, WorkloadRecheck, 85, 400)
	for i := range r.EndToEnd {
		if e := &r.EndToEnd[i]; e.Name == "sequential" {
			e.PerSecond, e.HandlerP50MS = 85, 400
		}
	}
	for _, row := range r.targets() {
		if strings.HasPrefix(row[0], "8. adaptive limit end to end") {
			if !strings.Contains(row[2], "against 82.0 at fixed G=1024") || !strings.HasSuffix(row[2], "meeting both: none") {
				t.Fatalf("the best fixed setting or those meeting both include rows that are not this listener's fixed settings on new hosts: %v", row)
			}
			return
		}
	}
	t.Fatal("no end-to-end adaptive target")
}

// A merge replaces only the scenarios measured again, keeps the rest, and
// the report says which run measured what.
func TestMergeReplacesOnlyTheScenariosMeasuredAgain(t *testing.T) {
	base := sampleReport()
	later := NewReport("later")
	later.Took = "9m"
	later.Adaptive = sampleAdaptive(3050, 24, 1.5)
	later.EndToEnd = base.EndToEnd[:1]
	points, crash := len(base.Points), len(base.Crash)
	if err := base.Merge(later, []string{"end-to-end", "adaptive"}); err != nil {
		t.Fatal(err)
	}
	if len(base.EndToEnd) != 1 || base.Adaptive == nil || len(base.Points) != points || len(base.Crash) != crash {
		t.Fatalf("after the merge: %d end-to-end, adaptive %v, %d points (want %d), %d crash (want %d)",
			len(base.EndToEnd), base.Adaptive != nil, len(base.Points), points, len(base.Crash), crash)
	}
	if err := base.Merge(later, []string{"adaptive", "end-to-end", "reads"}); err != nil || len(base.Updates) != 1 {
		t.Fatalf("a later merge of a superset: %v, %d updates kept, want only the later one", err, len(base.Updates))
	}
	if err := base.Merge(later, []string{"nonsense"}); err == nil {
		t.Fatal("a merge of an unknown scenario was accepted")
	}
	dir := t.TempDir()
	if err := base.WriteMarkdown(dir + "/b.md"); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(dir + "/b.md")
	if !strings.Contains(string(md), "in 9m (`-only adaptive,end-to-end,reads -merge`): adaptive, end-to-end, reads.") ||
		strings.Contains(string(md), "`-only end-to-end,adaptive -merge`") {
		t.Fatalf("the report does not say what the later run measured:\n%.600s", md)
	}
}
