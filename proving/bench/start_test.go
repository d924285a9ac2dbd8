package bench

import (
	"testing"
	"time"
)

// A run that finishes 100 records a second for its first second and 1,000
// a second after: a trailing window of 500 ms first holds 900 records a
// second 450 ms into the fast part, and the second half's rate is 1,000.
func TestStartReachedIsTheFirstTrailingWindowAtTheTarget(t *testing.T) {
	var f finished
	for d := time.Duration(0); d < time.Second; d += 10 * time.Millisecond {
		f = append(f, d)
	}
	for d := time.Second; d < 4*time.Second; d += time.Millisecond {
		f = append(f, d)
	}
	if got := f.steady(4 * time.Second); got < 999 || got > 1001 {
		t.Errorf("steady rate %.1f, want 1,000", got)
	}
	got := f.reached(900, 500*time.Millisecond, 4*time.Second)
	if got != 1450*time.Millisecond {
		t.Errorf("reached after %v, want 1.45s", got)
	}
	if got := f.reached(1100, 500*time.Millisecond, 4*time.Second); got != -1 {
		t.Errorf("a target over every window reached after %v, want -1", got)
	}
	if got := f.end(8*time.Second, len(f)); got != f[len(f)-1] {
		t.Errorf("a run whose topic ran dry ended at %v, want its last record's %v", got, f[len(f)-1])
	}
	if got := f.end(4*time.Second, len(f)+1); got != 4*time.Second {
		t.Errorf("a run whose topic did not run dry ended at %v, want the watch's 4s", got)
	}
	r := f.run("adaptive", 1024, 900, 500*time.Millisecond, 4*time.Second)
	if r.FirstSeconds != [3]int64{101, 1101, 3100} {
		t.Errorf("first 1/2/4 s %v, want [101 1101 3100]", r.FirstSeconds)
	}
}
