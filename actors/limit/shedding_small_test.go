package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// TestLoadSheddingDownstreamIsNotKeptInTrouble at smaller capacities (K =
// 4, 8; it tries 16 and 64), with the floor at 1 and at 8. A trouble of
// refusals over the capacity is not an outage: were it recovered from
// (recovering doubling back to the limit it began at after each lull, into
// the refusals again), a fifth of the attempts were refused for good (16 %
// at K = 4, 22 % at K = 8).
func TestALoadSheddingSmallDownstreamIsNotKeptInTrouble(t *testing.T) {
	for _, c := range []struct{ floor, k int }{{1, 4}, {1, 8}, {1, 16}, {8, 10}, {8, 12}} {
		k := c.k
		t.Run(fmt.Sprintf("floor=%d/K=%d", c.floor, k), func(t *testing.T) {
			cfg := limit.DefaultConfig(c.floor, 1024)
			s := newDsim(mustNew(t, cfg), k, flat(20*time.Millisecond))
			s.shed = true
			s.run(time.Minute)
			s.reset()
			s.run(2 * time.Minute)
			t.Logf("refused %.1f%% of attempts, mean limit %.1f (%.2f × K), throughput %.2f of K/L",
				100*s.failureShare(), s.meanLimit(), s.meanLimit()/float64(k), s.perSecond()/(float64(k)/0.02))
			if s.failureShare() >= 0.1 {
				t.Errorf("%.1f%% of attempts refused for two minutes (the limit at %.2f × K): the controller keeps the downstream in trouble",
					100*s.failureShare(), s.meanLimit()/float64(k))
			}
		})
	}
}
