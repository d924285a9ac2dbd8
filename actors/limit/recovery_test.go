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
