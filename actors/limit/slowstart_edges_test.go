package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A start over the capacity (K under the first limit, 32). When the second
// window, rising over 1.25 × the first, only held the limit and its mean (a
// queue's) became the reference, the law's cuts kept each later window's
// rise under a quarter, and the third and fourth windows doubled a limit
// already 3 to 6 × K (65b4faa). The slow start must never double a limit
// over the capacity.
func TestSlowStartNeverDoublesALimitOverTheCapacity(t *testing.T) {
	for _, c := range []struct {
		law limit.Law
		k   int
		l   time.Duration
	}{
		{limit.Gradient, 4, 20 * time.Millisecond},
		{limit.Gradient, 8, 400 * time.Millisecond},
		{limit.Gradient, 16, 400 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v/K=%d/L=%v", c.law, c.k, c.l), func(t *testing.T) {
			cfg := limit.DefaultConfig(4, 4096)
			cfg.Law = c.law
			s := newDsim(mustNew(t, cfg), c.k, flat(c.l))
			w, peak := 0, 0
			for i := 0; i < 20000 && s.c.SlowStart(); i++ {
				before := s.c.Limit()
				s.run(time.Millisecond)
				if s.c.Windows() != w {
					w = s.c.Windows()
					peak = max(peak, s.c.Limit())
					if before > c.k && s.c.Limit() >= 2*before-1 {
						t.Errorf("window %d: the slow start doubled %d (%.1f × K) -> %d (%.1f × K), latency %v (%.1f × L)",
							w, before, float64(before)/float64(c.k), s.c.Limit(), float64(s.c.Limit())/float64(c.k), s.c.Latency().Round(time.Millisecond), float64(s.c.Latency())/float64(c.l))
					}
				}
			}
			if w == 0 {
				t.Fatal("no window closed during the slow start: nothing was checked")
			}
			t.Logf("peak limit %d (%.1f × K); after the slow start: limit %d, phase %v", peak, float64(peak)/float64(c.k), s.c.Limit(), s.c.Phase())
		})
	}
}

// What doubling over the capacity cost: K = 8, L = 400 ms, the mean limit
// from 10 s to 20 s 4.2 × K and the latency 8 × L at 65b4faa; without the
// slow start 1.4 × K.
func TestSlowStartOverTheCapacityIsNotKeptThere(t *testing.T) {
	for _, ss := range []bool{false, true} {
		t.Run(fmt.Sprintf("SlowStart=%v", ss), func(t *testing.T) {
			const k, l = 8, 400 * time.Millisecond
			cfg := limit.DefaultConfig(4, 4096)
			cfg.SlowStart = ss
			s := newDsim(mustNew(t, cfg), k, flat(l))
			s.run(10 * time.Second)
			s.reset()
			s.run(10 * time.Second)
			t.Logf("10-20 s: mean limit %.2f × K, mean latency %.2f × L", s.meanLimit()/k, float64(s.meanLatency())/float64(l))
			if m := s.meanLimit(); m > 1.5*k {
				t.Errorf("mean limit %.1f over 1.5 × K = %d from 10 s to 20 s", m, k)
			}
		})
	}
}

// The slow start reaching the ceiling in the window a scheduled probe is
// due (latency 1 s: windows of 2 s, the sixth, at 11 s, reaches 1,024, and
// the first probe was due at 10 s) halved the limit at once at 65b4faa; the
// probe now waits ProbeInterval from there.
func TestSlowStartToTheCeilingDefersADueProbe(t *testing.T) {
	c := mustNew(t, limit.DefaultConfig(8, 1024))
	now := time.Unix(0, 0)
	for w := 0; c.SlowStart(); w++ {
		before := closeWindow(t, c, &now, time.Second, time.Second/16)
		t.Logf("window %d at %v: %d -> %d, slow start %v, phase %v", w+1, now.Sub(time.Unix(0, 0)), before, c.Limit(), c.SlowStart(), c.Phase())
	}
	if c.Limit() != 1024 || c.Phase() != limit.Steady {
		t.Errorf("the slow start ended at a flat latency with limit %d, phase %v; want the ceiling 1024, Steady", c.Limit(), c.Phase())
	}
}

// A last doubling to the ceiling in a window with 4 % failing (under
// troubleShare/2) ended the slow start "at the ceiling" with the limit under
// it (2 × 603 × 0.98 = 1,182 of 1,200) at 65b4faa.
func TestSlowStartsLastDoublingReachesTheCeiling(t *testing.T) {
	c := mustNew(t, limit.DefaultConfig(4, 1200))
	now := time.Unix(0, 0)
	const d = 20 * time.Millisecond
	for c.SlowStart() && 2*c.Limit() < 1200 {
		closeWindow(t, c, &now, d, d/16)
	}
	for w, i := c.Windows(), 0; c.Windows() == w; i++ {
		now = now.Add(d / 16)
		c.Observe(now, limit.Sample{Latency: d, Congested: i%25 == 0, InFlight: c.Limit()})
	}
	if !c.SlowStart() && c.Limit() != 1200 {
		t.Errorf("the slow start ended without a rise, at 4%% failing, with the limit %d under the ceiling 1200", c.Limit())
	}
}

// App-limited windows held the slow start for good at 65b4faa (an hour at
// 4 in flight: still in it, the limit 32), and no probe ever began,
// scheduled ones included: a window that does not double once a probe is
// due ends it.
func TestAppLimitedSlowStartEndsWhenAProbeIsDue(t *testing.T) {
	c := mustNew(t, limit.DefaultConfig(4, 1024))
	now := time.Unix(0, 0)
	probes := 0
	for i := 0; i < 3_600_000/5; i++ { // an hour, one sample each 5 ms
		now = now.Add(5 * time.Millisecond)
		c.Observe(now, limit.Sample{Latency: 20 * time.Millisecond, InFlight: 4})
		if c.Phase() != limit.Steady {
			probes++
		}
	}
	if c.SlowStart() || probes == 0 {
		t.Errorf("after an hour app-limited: slow start %v, limit %d, %d samples taken during a probe", c.SlowStart(), c.Limit(), probes)
	}
}
