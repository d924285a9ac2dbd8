package e2e

import (
	"strings"
	"testing"
	"time"
)

func limitRun(t0 time.Time, before, during, after int) []limitSample {
	var out []limitSample
	for s := -10; s < 60; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		l := before
		switch {
		case s >= 0 && s <= 15:
			l = during
		case s > 15:
			l = after
		}
		out = append(out, limitSample{at: at, limit: l, inFlight: l, floor: 8, mode: "adaptive"})
	}
	return out
}

// The judge passes a limit that falls in the trouble and rises after it,
// and fails one that stays put, one that never recovers, and fixed
// concurrency.
func TestJudgeLimitThroughTrouble(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name                  string
		before, during, after int
		mode                  string
		problem               string
	}{
		{"falls and recovers", 64, 8, 90, "adaptive", ""},
		{"falls to the floor from near it", 12, 8, 20, "adaptive", ""},
		{"never falls", 64, 60, 70, "adaptive", "did not fall"},
		{"never recovers", 64, 8, 9, "adaptive", "did not recover"},
		{"fixed", 64, 8, 90, "fixed", "not adaptive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &listenerProc{limits: limitRun(t0, tc.before, tc.during, tc.after)}
			for i := range p.limits {
				p.limits[i].mode = tc.mode
			}
			r := &run{listeners: []*listenerProc{p}, troubleFrom: t0, troubleTo: t0.Add(15 * time.Second)}
			var line Line
			if err := judgeLimitThroughTrouble(r, &line); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(line.Problems, "; ")
			if (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
				t.Fatalf("problems %q, want one containing %q", got, tc.problem)
			}
			if len(line.Details) != 1 || !strings.Contains(line.Details[0], "*") {
				t.Fatalf("details %q: want one timeline marking the trouble", line.Details)
			}
		})
	}
	var line Line
	_ = judgeLimitThroughTrouble(&run{}, &line)
	if len(line.Problems) == 0 {
		t.Fatal("an unmarked trouble passed")
	}
}
