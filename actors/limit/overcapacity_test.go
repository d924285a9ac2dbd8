package limit_test

// Probes begun at a limit twice the capacity or more; the downstream model is
// regressions2_sim_test.go.

import (
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A limit that starts far over the capacity (8 × K: a downstream smaller
// than the listener was set for) is halved by the first probe to 4 × K, and
// that window's mean is a queue's: 2 s after the start the Vegas law's
// baseline was 4 to 4.6 × L and AIMD's 2.9 to 3 × L, before 69026a9 and
// after it (the gradient law's 1 to 1.23 × L: it cuts the limit faster). The
// probe lowers the limit again while the window at the lowered one
// completes about as many records as the window before it did.
func TestProbeOverTheCapacityLowersTheLimitAgain(t *testing.T) {
	const l = 20 * time.Millisecond
	for _, law := range laws {
		for _, k := range []int{8, 16, 64} {
			t.Run(fmt.Sprintf("%v/K=%d", law, k), func(t *testing.T) {
				cfg := limit.DefaultConfig(1, 4096)
				cfg.Law = law
				cfg.Initial = 8 * k
				s := newDsim(mustNew(t, cfg), k, flat(l))
				s.run(2 * time.Second)
				if b := s.c.Baseline(); b > l*5/4 {
					t.Errorf("2 s after starting at 8 × K, the baseline is %v (%.2f × L = %v): a queue's latency", b, float64(b)/float64(l), l)
				}
			})
		}
	}
}

// A downstream that gets faster after a probe has measured it (4 × L for
// 30 s, then L; or warming up from 10 × L to L over 4 s) leaves the default
// law's limit at 1.8 to 1.9 × K, the latency as far over L, for the 6 s
// after, when the probe the speed-up brings begins at twice the capacity:
// its measurement, a queue's, was the baseline until the next probe (before
// 69026a9 steady windows lowered it: 1.35 to 1.45 × K).
func TestSpeedUpAfterAProbeDoesNotLeaveTheLimitOverTheCapacity(t *testing.T) {
	const l = 20 * time.Millisecond
	for _, c := range []struct {
		name string
		k    int
		svc  func(since time.Duration) time.Duration
		at   time.Duration // when the downstream stops getting faster
	}{
		{"4 × L for 30 s, then L", 16, func(d time.Duration) time.Duration {
			if d < 30*time.Second {
				return 4 * l
			}
			return l
		}, 30 * time.Second},
		{"10 × L to L over 4 s", 32, func(d time.Duration) time.Duration {
			return time.Duration(float64(l) * (1 + 9*max(0, 1-float64(d)/float64(4*time.Second))))
		}, 4 * time.Second},
	} {
		t.Run(fmt.Sprintf("K=%d/%s", c.k, c.name), func(t *testing.T) {
			s := newDsim(mustNew(t, limit.DefaultConfig(4, 4096)), c.k, nil)
			start := s.now
			s.svc = func(at time.Time) time.Duration { return c.svc(at.Sub(start)) }
			s.run(c.at + 2*time.Second)
			s.reset()
			s.run(6 * time.Second)
			lat := s.meanLatency()
			t.Logf("2-8 s after: mean limit %.2f × K, mean latency %.2f × L, baseline %v", s.meanLimit()/float64(c.k), float64(lat)/float64(l), s.c.Baseline())
			if s.meanLimit() > 1.5*float64(c.k) || lat > l*3/2 {
				t.Errorf("2-8 s after the downstream got faster: mean limit %.1f (%.2f × K = %d), mean latency %.2f × L (want ≤ 1.5 × K and ≤ 1.5 × L)",
					s.meanLimit(), s.meanLimit()/float64(c.k), c.k, float64(lat)/float64(l))
			}
		})
	}
}
