package limit_test

import (
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A downstream that starts cold (connections to open, caches to fill)
// answers slowly at first whatever the concurrency, and faster window after
// window as it warms: every window is then a new lowest mean, the baseline
// follows it down while the limit grows on it, and once the warm-up is
// over the baseline is a loaded latency. Without a probe until
// ProbeInterval after the start, the limit stays over the capacity and the
// records queue until then: a probe must come once the latency has stopped
// falling.
func TestWarmUpDoesNotLeaveALoadedBaseline(t *testing.T) {
	const (
		k      = 64
		l      = 20 * time.Millisecond
		warmUp = 4 * time.Second
	)
	for _, law := range laws {
		t.Run(law.String(), func(t *testing.T) {
			cfg := limit.DefaultConfig(4, 1024)
			cfg.Law = law
			s := newDsim(mustNew(t, cfg), k, nil)
			start := s.now
			s.svc = func(at time.Time) time.Duration {
				cold := max(0, 1-float64(at.Sub(start))/float64(warmUp)) // 1 at the start, 0 once warm
				return time.Duration(float64(l) * (1 + 9*cold))
			}
			s.run(warmUp + 2*time.Second)
			s.reset()
			s.run(3 * time.Second) // from 2 s to 5 s after the warm-up: before the first ProbeInterval
			lat := s.meanLatency()
			t.Logf("from 2 s after the warm-up: mean limit %.1f, mean latency %v (%.2f × L), baseline %v", s.meanLimit(), lat, float64(lat)/float64(l), s.c.Baseline())
			// Left loaded, the baseline is 2.4-2.8 × L here.
			if b := s.c.Baseline(); b > 2*l {
				t.Errorf("5 s after the warm-up the baseline is %v (L = %v): a loaded latency", b, l)
			}
			// The default law also brings the limit back near K by then
			// (Vegas falls by log10(limit) a window, more slowly).
			if law == limit.Gradient && (s.meanLimit() > 1.5*k || lat > l*3/2) {
				t.Errorf("2-5 s after the warm-up the mean limit is %.1f (K = %d) and the mean latency %v (want ≤ 1.5 × K and ≤ 1.5 × L = %v)", s.meanLimit(), k, lat, l*3/2)
			}
		})
	}
}
