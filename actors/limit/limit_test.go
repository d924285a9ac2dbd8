package limit_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/limit"
)

var laws = []limit.Law{limit.Gradient, limit.Vegas, limit.AIMD}

func drawConfig(t *rapid.T, probe bool, maxCeiling int) limit.Config {
	floor := rapid.IntRange(1, 64).Draw(t, "floor")
	ceiling := rapid.IntRange(floor, max(floor, maxCeiling)).Draw(t, "ceiling")
	cfg := limit.DefaultConfig(floor, ceiling)
	cfg.Law = rapid.SampledFrom(laws).Draw(t, "law")
	cfg.MinSamples = rapid.IntRange(1, 32).Draw(t, "minSamples")
	cfg.Tolerance = rapid.Float64Range(1, limit.MaxTolerance).Draw(t, "tolerance")
	if !probe {
		cfg.ProbeInterval = 0
	}
	return cfg
}

type fataler interface{ Fatalf(string, ...any) }

func mustNew(t fataler, cfg limit.Config) *limit.Controller {
	c, err := limit.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return c
}

// closeWindow feeds samples of latency d, one every step, with the limit in
// flight, until a window closes, and returns the limit before it closed.
func closeWindow(t fataler, c *limit.Controller, now *time.Time, d, step time.Duration) int {
	before := c.Limit()
	for i := 0; i < 1_000_000; i++ {
		*now = now.Add(step)
		if c.Observe(*now, limit.Sample{Latency: d, InFlight: c.Limit()}) {
			return before
		}
	}
	t.Fatalf("no window closed after a million samples")
	return before
}

func TestLimitNeverLeavesFloorAndCeiling(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, rapid.Bool().Draw(t, "probe"), 4096)
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		for i, n := 0, rapid.IntRange(1, 3000).Draw(t, "samples"); i < n; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "gap")))
			s := limit.Sample{
				Latency:   time.Duration(rapid.Int64Range(-int64(time.Millisecond), int64(10*time.Second)).Draw(t, "latency")),
				Congested: rapid.Float64Range(0, 1).Draw(t, "p") < 0.2,
				InFlight:  rapid.IntRange(0, 2*cfg.Ceiling).Draw(t, "inFlight"),
			}
			c.Observe(now, s)
			if l := c.Limit(); l < cfg.Floor || l > cfg.Ceiling {
				t.Fatalf("limit %d outside [%d, %d] after sample %d %+v", l, cfg.Floor, cfg.Ceiling, i, s)
			}
		}
	})
}

func TestLimitGrowsWhileLatencyStaysAtBaseline(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, false, 512)
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		d := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Second)).Draw(t, "latency"))
		step := time.Duration(rapid.Int64Range(int64(10*time.Microsecond), int64(20*time.Millisecond)).Draw(t, "step"))
		for w := 0; c.Limit() < cfg.Ceiling; w++ {
			if w > cfg.Ceiling+10 {
				t.Fatalf("limit %d has not reached the ceiling %d after %d windows at baseline", c.Limit(), cfg.Ceiling, w)
			}
			before := closeWindow(t, c, &now, d, step)
			if w > 0 && c.Limit() <= before {
				t.Fatalf("window %d at baseline latency %v: limit %d -> %d, want growth", w, d, before, c.Limit())
			}
		}
	})
}

func TestLimitShrinksWhenLatencyClimbs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, false, 4096)
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		base := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Second)).Draw(t, "baseline"))
		for w := 0; w < 40; w++ {
			closeWindow(t, c, &now, base, base/16)
		}
		factor := rapid.Float64Range(2, 20).Draw(t, "factor")
		slow := time.Duration(float64(base) * factor * cfg.Tolerance)
		// Each law's fixed point under a latency of at least twice the
		// tolerated one (the tolerance × the baseline): gradient's scale of at most 0.5 and √limit allowance
		// settle at 4; Vegas's queue estimate of limit × (1 − 1/factor)
		// stays above 6·log10(limit) down to about 20; AIMD falls to the
		// floor. The slow start has the limit at the ceiling by now, and
		// Vegas falls by log10(limit) a window: about 1,400 windows from
		// 4,096.
		settle := map[limit.Law]int{limit.Gradient: 4, limit.Vegas: 20, limit.AIMD: cfg.Floor}[cfg.Law]
		windows := 400
		if cfg.Law == limit.Vegas {
			windows = 2000
		}
		for w := 0; w < windows; w++ {
			before := closeWindow(t, c, &now, slow, slow/16)
			if c.Limit() > before {
				t.Fatalf("window %d at %.1f × the tolerated latency: limit grew %d -> %d", w, factor, before, c.Limit())
			}
		}
		if want := max(cfg.Floor, settle); c.Limit() > want {
			t.Fatalf("%v at %.1f × the tolerated latency for %d windows: limit %d, want at most %d", cfg.Law, factor, windows, c.Limit(), want)
		}
	})
}

func TestTransientFailuresShrinkTheLimitToTheFloor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, true, 4096)
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		for w := 0; w < 20; w++ {
			closeWindow(t, c, &now, 10*time.Millisecond, time.Millisecond)
		}
		for w := 0; c.Limit() > cfg.Floor; w++ {
			if w > 20 {
				t.Fatalf("limit %d above the floor %d after %d windows of failures", c.Limit(), cfg.Floor, w)
			}
			before := c.Limit()
			for closed := false; !closed; {
				now = now.Add(10 * time.Millisecond)
				closed = c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: before})
			}
			if c.Limit() >= before {
				t.Fatalf("a window of failures left the limit at %d (was %d)", c.Limit(), before)
			}
		}
	})
}

func TestAppLimitedWindowsDoNotRaiseTheLimit(t *testing.T) {
	cfg := limit.DefaultConfig(1, 1024)
	cfg.ProbeInterval = 0
	c := mustNew(t, cfg)
	now := time.Unix(0, 0)
	start := c.Limit()
	for i := 0; i < 10_000; i++ {
		now = now.Add(time.Millisecond)
		c.Observe(now, limit.Sample{Latency: 10 * time.Millisecond, InFlight: start/2 - 1})
	}
	if c.Windows() == 0 {
		t.Fatal("no window closed")
	}
	if c.Limit() != start {
		t.Fatalf("app-limited windows moved the limit %d -> %d", start, c.Limit())
	}
}

// A downstream that became slower for everyone (latency up, whatever the
// concurrency) is a new baseline, not congestion: a probe finds it, and the
// limit grows back. Without probes the baseline never rises.
func TestProbeRaisesTheBaselineOfASlowerDownstream(t *testing.T) {
	for _, probe := range []time.Duration{0, 5 * time.Second} {
		cfg := limit.DefaultConfig(4, 1024)
		cfg.ProbeInterval = probe
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		for w := 0; w < 30; w++ {
			closeWindow(t, c, &now, 10*time.Millisecond, time.Millisecond)
		}
		end := now.Add(4 * probe)
		if probe == 0 {
			end = now.Add(20 * time.Second)
		}
		for now.Before(end) {
			closeWindow(t, c, &now, 30*time.Millisecond, time.Millisecond)
		}
		switch {
		case probe == 0 && c.Baseline() != 10*time.Millisecond:
			t.Fatalf("without probes the baseline moved to %v", c.Baseline())
		case probe > 0 && c.Baseline() != 30*time.Millisecond:
			t.Fatalf("probing every %v: baseline %v after the downstream slowed to 30ms, want 30ms", probe, c.Baseline())
		case probe > 0 && c.Limit() < 512:
			t.Fatalf("probing every %v: limit %d, want it grown back towards the ceiling", probe, c.Limit())
		}
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []limit.Config{
		{Floor: 0, Ceiling: 10, MinWindow: time.Millisecond, MaxWindow: time.Second, MinSamples: 1},
		{Floor: 10, Ceiling: 5, MinWindow: time.Millisecond, MaxWindow: time.Second, MinSamples: 1},
		{Floor: 1, Ceiling: 10, Initial: 11, MinWindow: time.Millisecond, MaxWindow: time.Second, MinSamples: 1},
		{Floor: 1, Ceiling: 10, MinWindow: time.Second, MaxWindow: time.Millisecond, MinSamples: 1},
		{Floor: 1, Ceiling: 10, MinWindow: time.Millisecond, MaxWindow: time.Second, MinSamples: 0},
		{Floor: 1, Ceiling: 10, Law: limit.Law(7), MinWindow: time.Millisecond, MaxWindow: time.Second, MinSamples: 1},
	}
	for _, cfg := range bad {
		if _, err := limit.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted an invalid config", cfg)
		}
	}
	if _, err := limit.New(limit.DefaultConfig(8, 1024)); err != nil {
		t.Errorf("default config refused: %v", err)
	}
	for _, l := range laws {
		if got, err := limit.ParseLaw(l.String()); err != nil || got != l {
			t.Errorf("ParseLaw(%q) = %v, %v", l.String(), got, err)
		}
	}
	if _, err := limit.ParseLaw("pid"); err == nil {
		t.Error("ParseLaw accepted an unknown law")
	}
}
