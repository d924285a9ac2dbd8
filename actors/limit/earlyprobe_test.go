package limit_test

// Regressions of the early probe (a probe once the latency has stopped
// falling); each failed on the controller before its fix. The downstream
// model is regressions2_sim_test.go.

import (
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A downstream whose calls are mostly fast but now and then slow (a cache
// hit in 5 ms, a miss in 200 ms, ± 50 %) does not get faster: its window
// means only scatter. A lucky window (few misses) is a new lowest mean, a
// fifth under what the last probe measured, and three windows later an
// early probe began; its measuring window, as scattered, set the baseline
// back up, and so on: with a tenth of misses the limit was halved for a
// probe 14-33 % of the time, a probe every window or so, where the
// schedule (one every ProbeInterval) halves it 2-4 % of the time.
func TestScatteredLatencyDoesNotCascadeEarlyProbes(t *testing.T) {
	const dur = 90 * time.Second
	for _, law := range laws {
		for _, misses := range []float64{0.05, 0.1, 0.2} {
			t.Run(fmt.Sprintf("%v/misses=%.2f", law, misses), func(t *testing.T) {
				cfg := limit.DefaultConfig(4, 1024)
				cfg.Law = law
				s := newDsim(mustNew(t, cfg), 64, nil)
				s.svc = func(time.Time) time.Duration {
					if s.rng.Float64() < misses {
						return 200 * time.Millisecond
					}
					return 5 * time.Millisecond
				}
				s.run(30 * time.Second)
				s.reset()
				s.run(dur)
				scheduled := int(dur / cfg.ProbeInterval)
				t.Logf("%d probes in %v (%d scheduled), the limit halved %.1f%% of the time, mean limit %.1f",
					s.probes, dur, scheduled, 100*s.probingShare(), s.meanLimit())
				if s.probes > 2*scheduled {
					t.Errorf("%d probes in %v, the limit halved %.1f%% of the time: a downstream that does not get faster had early probes (want at most %d probes)",
						s.probes, dur, 100*s.probingShare(), 2*scheduled)
				}
			})
		}
	}
}

// A probe abandoned because a tenth of a window's attempts failed left the
// conditions of an early one in place (no baseline measured, the steady
// windows counted): the next window under a tenth of failures began another
// at once, the limit halved again, however soon the schedule (pushed to
// ProbeInterval later by the abandoned probe) said the next was due.
func TestAbandonedProbeIsNotRetriedAtOnce(t *testing.T) {
	cfg := limit.DefaultConfig(4, 1024)
	// A slow start that reaches the ceiling at a flat latency has measured
	// the baseline and leaves no early probe due; this test needs one.
	cfg.SlowStart = false
	c := mustNew(t, cfg)
	now := time.Unix(0, 0)
	window := func(failEvery int) {
		for w, i := c.Windows(), 0; c.Windows() == w; i++ {
			now = now.Add(time.Millisecond)
			c.Observe(now, limit.Sample{Latency: 10 * time.Millisecond, Congested: failEvery > 0 && i%failEvery == 0, InFlight: c.Limit()})
		}
	}
	for c.Phase() == limit.Steady && c.Windows() < 20 {
		window(0) // the latency flat: it stopped falling at once
	}
	if c.Phase() != limit.Draining {
		t.Fatalf("no early probe in %d windows of a flat latency before any probe measured it", c.Windows())
	}
	for c.Phase() != limit.Steady {
		window(5) // a fifth failing: the probe is abandoned
	}
	ended := now
	for range 20 {
		window(0)
		if c.Phase() != limit.Steady {
			t.Fatalf("a probe began %v after one abandoned for failures, at window %d, the latency flat (the next is due %v after)",
				now.Sub(ended), c.Windows(), limit.DefaultConfig(4, 1024).ProbeInterval)
		}
	}
	if now.Sub(ended) >= limit.DefaultConfig(4, 1024).ProbeInterval {
		t.Fatalf("the test ran %v of windows: past the scheduled probe", now.Sub(ended))
	}
}

// The same in the model: a downstream refusing a share of the attempts at
// once whatever the load (a flaky link), about troubleShare, so that some
// windows are in trouble and some not. Each probe abandoned for failures was
// followed by another at the next quiet window: up to 53 probes in 90 s where
// 9 are scheduled.
func TestFailuresAboutTroubleDoNotCascadeProbes(t *testing.T) {
	const dur = 90 * time.Second
	for _, law := range laws {
		for _, flaky := range []float64{0.12, 0.15} {
			t.Run(fmt.Sprintf("%v/refused=%.2f", law, flaky), func(t *testing.T) {
				cfg := limit.DefaultConfig(4, 1024)
				cfg.Law = law
				s := newDsim(mustNew(t, cfg), 64, flat(20*time.Millisecond))
				s.flaky = flaky
				s.run(30 * time.Second)
				s.reset()
				s.run(dur)
				scheduled := int(dur / cfg.ProbeInterval)
				t.Logf("%d probes in %v (%d scheduled), the limit halved %.1f%% of the time, %.1f%% of attempts refused",
					s.probes, dur, scheduled, 100*s.probingShare(), 100*s.failureShare())
				if s.probes > 2*scheduled {
					t.Errorf("%d probes in %v with %.0f%% of attempts refused (want at most %d)", s.probes, dur, 100*flaky, 2*scheduled)
				}
			})
		}
	}
}
