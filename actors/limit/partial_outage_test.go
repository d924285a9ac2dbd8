package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A partial outage (a share of the attempts failing fast for 5 s, the rest
// served) cuts the limit as an outage does; once it ends the limit is back
// as fast as after a full one (TestLimitRecoversWithinASecondOfAnOutage).
// Telling outages from load shedding by the share failing (nine in ten)
// took 1.5 s after a half or 70 % outage.
func TestLimitRecoversWithinASecondOfAPartialOutage(t *testing.T) {
	for _, share := range []float64{1.0, 0.5, 0.7, 0.8} {
		k := 256
		rng := rand.New(rand.NewPCG(3, uint64(k)))
		c := mustNew(t, limit.DefaultConfig(8, 1024))
		now := time.Unix(0, 0)
		l := 20 * time.Millisecond
		d := downstream{k: k, l: l}
		before, _, _ := run(c, d, &now, 20*time.Second, rng)
		for end := now.Add(5 * time.Second); now.Before(end); now = now.Add(time.Millisecond) {
			for range max(1, c.Limit()/5) {
				if rng.Float64() < share {
					c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: c.Limit()})
				} else {
					c.Observe(now, limit.Sample{Latency: l, InFlight: c.Limit()})
				}
			}
		}
		during := c.Limit()
		recovered := now
		var back time.Duration = -1
		for end := now.Add(5 * time.Second); now.Before(end); {
			run(c, d, &now, 10*time.Millisecond, rng)
			if back < 0 && float64(c.Limit()) >= 0.8*before {
				back = now.Sub(recovered)
			}
		}
		t.Logf("failing share %.1f: limit %.0f before, %d at the outage's end, back to 80%% after %v", share, before, during, back)
		if back < 0 || back > time.Second {
			t.Errorf("failing share %.1f: the limit (%d at the end of the trouble) was back to 80%% of %.0f after %v, want within 1 s as after a full outage",
				share, during, before, back)
		}
	}
}
