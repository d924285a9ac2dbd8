package limit_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// While the downstream gets faster whatever the load (warming up after a
// start, recovering), each window's mean is a new lowest: the baseline
// follows it down, the law sees latency at baseline and, before this rule,
// raised the limit every window, so that a listener starting on a cold
// database ran at twice its limit's worth of queue once the fall ended
// (measured end to end: 38 to 68 in six windows of 986 ms falling to 378).
// A window a twentieth or more under the baseline does not raise the limit,
// for at most four windows in a row: a downstream that keeps getting faster
// must not keep the limit where it started (TestLongSpeedUpDoesNotStarveTheDownstream).
func TestFallingLatencyDoesNotRaiseTheLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, false, 1024)
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		d := float64(rapid.Int64Range(int64(10*time.Millisecond), int64(2*time.Second)).Draw(t, "first latency"))
		fall := rapid.Float64Range(0.5, 0.94).Draw(t, "each window's mean over the last")
		step := time.Duration(rapid.Int64Range(int64(100*time.Microsecond), int64(5*time.Millisecond)).Draw(t, "step"))
		closeWindow(t, c, &now, time.Duration(d), step) // the first window sets the baseline
		falls := rapid.IntRange(1, 4).Draw(t, "falling windows")
		for w := range falls {
			d *= fall
			before := closeWindow(t, c, &now, time.Duration(d), step)
			if c.Limit() > before {
				t.Fatalf("window %d, its mean %.2f × the last: limit %d -> %d, want no growth while the latency falls", w+1, fall, before, c.Limit())
			}
		}
		// Once the fall ends, or past four falling windows, the law raises
		// the limit again.
		if falls == 4 && rapid.Bool().Draw(t, "a fifth falling window") {
			d *= fall
		}
		before := closeWindow(t, c, &now, time.Duration(d), step)
		if before < cfg.Ceiling && c.Limit() <= before {
			t.Fatalf("after %d falling windows, a window at %.0f ms: limit %d -> %d, want growth", falls, d/1e6, before, c.Limit())
		}
	})
}
