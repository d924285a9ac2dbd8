package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// An outage that begins while a probe has lowered the limit is recovered
// from to the limit before the probe, as fast as one begun in a steady
// window: the trouble began there. Recovered only to the probe's lowered
// limit (halved again by the failures), the law climbed the rest: 1.65 s
// back against 0.4 s at K = 1024.
func TestAnOutageDuringAProbeRecoversToTheLimitBeforeIt(t *testing.T) {
	for _, k := range []int{64, 256, 1024} {
		rng := rand.New(rand.NewPCG(3, uint64(k)))
		c := mustNew(t, limit.DefaultConfig(8, 2048))
		now := time.Unix(0, 0)
		d := downstream{k: k, l: 20 * time.Millisecond}
		before, _, _ := run(c, d, &now, 20*time.Second, rng)
		for i := 0; c.Phase() == limit.Steady && i < 20000; i++ {
			run(c, d, &now, time.Millisecond, rng)
		}
		if c.Phase() == limit.Steady {
			t.Fatalf("K=%d: no probe began", k)
		}
		for end := now.Add(5 * time.Second); now.Before(end); now = now.Add(time.Millisecond) {
			for range max(1, c.Limit()/5) {
				c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: c.Limit()})
			}
		}
		recovered := now
		var back time.Duration = -1
		for end := now.Add(5 * time.Second); now.Before(end) && back < 0; {
			run(c, d, &now, 10*time.Millisecond, rng)
			if float64(c.Limit()) >= 0.8*before {
				back = now.Sub(recovered)
			}
		}
		t.Logf("K=%d: limit %.0f before; back to 80%% after %v", k, before, back)
		if back < 0 || back > time.Second {
			t.Errorf("K=%d: an outage begun in a probe: back to 80%% of %.0f after %v, want within 1 s (as after any outage)", k, before, back)
		}
	}
}
