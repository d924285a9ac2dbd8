package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// After an outage (every attempt failing for 5 s, which halves the limit
// each window down to its floor), the limit climbs back to where it was
// within a second of the downstream serving again, doubling each window as
// a slow start does, instead of growing by √limit a window from the floor;
// and no higher than it was (the downstream's capacity has not changed).
func TestLimitRecoversWithinASecondOfAnOutage(t *testing.T) {
	for _, k := range []int{64, 256} {
		rng := rand.New(rand.NewPCG(3, uint64(k)))
		c := mustNew(t, limit.DefaultConfig(8, 1024))
		now := time.Unix(0, 0)
		l := 20 * time.Millisecond
		d := downstream{k: k, l: l}
		before, _, _ := run(c, d, &now, 20*time.Second, rng)
		// The outage: the in-flight records fail fast, a sample each.
		for end := now.Add(5 * time.Second); now.Before(end); now = now.Add(time.Millisecond) {
			for range max(1, c.Limit()/5) {
				c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: c.Limit()})
			}
		}
		during := c.Limit()
		recovered := now
		var back time.Duration = -1
		highest := 0
		for end := now.Add(5 * time.Second); now.Before(end); {
			run(c, d, &now, 10*time.Millisecond, rng)
			highest = max(highest, c.Limit())
			if back < 0 && float64(c.Limit()) >= 0.8*before {
				back = now.Sub(recovered)
			}
		}
		t.Logf("K=%d: limit %.0f before, %d at the outage's end, back to 80%% after %v, at most %d after", k, before, during, back, highest)
		if during > 2*8 {
			t.Errorf("K=%d: the limit did not fall in the outage (%d)", k, during)
		}
		if back < 0 || back > time.Second {
			t.Errorf("K=%d: the limit was back to 80%% of %.0f after %v, want within 1 s", k, before, back)
		}
		if float64(highest) > 1.5*before {
			t.Errorf("K=%d: the limit overshot to %d after the outage (%.0f before)", k, highest, before)
		}
	}
}

// No probe starts while the limit doubles back after an outage: one due
// then (its interval ran out during the outage) lowered the limit to
// measure while the records woken by the recovery waited for credits. The
// limit never falls until it is back where it was.
func TestNoProbeWhileTheLimitDoublesBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 256))
	cfg := limit.DefaultConfig(8, 1024)
	c := mustNew(t, cfg)
	now := time.Unix(0, 0)
	d := downstream{k: 256, l: 20 * time.Millisecond}
	before, _, _ := run(c, d, &now, 20*time.Second, rng)
	// An outage longer than the probe interval: a probe is due when it ends.
	for end := now.Add(cfg.ProbeInterval + time.Second); now.Before(end); now = now.Add(time.Millisecond) {
		for range max(1, c.Limit()/5) {
			c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: c.Limit()})
		}
	}
	last := c.Limit()
	for end := now.Add(2 * time.Second); now.Before(end) && float64(last) < 0.8*before; {
		run(c, d, &now, 10*time.Millisecond, rng)
		if l := c.Limit(); l < last || c.Phase() != limit.Steady {
			t.Fatalf("the limit went from %d to %d while doubling back to %.0f, phase %v", last, l, before, c.Phase())
		}
		last = c.Limit()
	}
	if float64(last) < 0.8*before {
		t.Fatalf("the limit was at %d 2 s after the outage, %.0f before", last, before)
	}
	// Nor just as it is back: the probe comes a quarter ProbeInterval later.
	back := now
	for end := now.Add(cfg.ProbeInterval/4 - 200*time.Millisecond); now.Before(end); {
		run(c, d, &now, 10*time.Millisecond, rng)
		if c.Phase() != limit.Steady {
			t.Fatalf("a probe (phase %v) %v after the limit was back", c.Phase(), now.Sub(back))
		}
	}
}

// The attempts that straddled an outage's end fail after it (a client's own
// retries ran out), among the first served ones: they hold no recovery
// back. Taken for trouble, they kept the limit at its floor, then ended
// the recovery, and the limit climbed by the law. Measured side by side
// with the same outage without them.
func TestStraddlingFailuresDoNotHoldTheRecoveryBack(t *testing.T) {
	backAfter := func(straddlers bool) time.Duration {
		rng := rand.New(rand.NewPCG(9, 256))
		c := mustNew(t, limit.DefaultConfig(8, 1024))
		now := time.Unix(0, 0)
		d := downstream{k: 256, l: 20 * time.Millisecond}
		before, _, _ := run(c, d, &now, 20*time.Second, rng)
		for end := now.Add(5 * time.Second); now.Before(end); now = now.Add(time.Millisecond) {
			for range max(1, c.Limit()/5) {
				c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: c.Limit()})
			}
		}
		recovered := now
		for end := now.Add(3 * time.Second); now.Before(end); {
			run(c, d, &now, 10*time.Millisecond, rng)
			if straddlers && now.Sub(recovered) < 600*time.Millisecond {
				// Attempts begun in the outage (a client's retries over
				// 700 ms), failing now: a third as many as those served.
				for range max(1, c.Limit()/3) {
					c.Observe(now, limit.Sample{Latency: 700 * time.Millisecond, Congested: true, InFlight: c.Limit()})
				}
			}
			if float64(c.Limit()) >= 0.8*before {
				return now.Sub(recovered)
			}
		}
		return -1
	}
	clean, straddled := backAfter(false), backAfter(true)
	t.Logf("back to 80%% after %v without straddling failures, %v with", clean, straddled)
	if straddled < 0 || straddled > clean+100*time.Millisecond {
		t.Fatalf("back to 80%% after %v with straddling failures (-1: not in 3 s), %v without", straddled, clean)
	}
}
