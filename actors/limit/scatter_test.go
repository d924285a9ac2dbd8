package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// scattered is a downstream whose speed changes from one slot of time to
// the next, whatever the load: each slot's service time is l times a factor
// drawn in [1 − spread, 1 + spread] (a shared disk, a neighbour's batch
// job, a garbage collector). Calls starting in the same slot share it.
func scattered(l, slot time.Duration, spread float64, seed uint64) func(time.Time) time.Duration {
	return func(at time.Time) time.Duration {
		r := rand.New(rand.NewPCG(seed, uint64(at.UnixNano()/int64(slot))))
		return time.Duration(float64(l) * (1 - spread + 2*spread*r.Float64()))
	}
}

// A downstream whose window means scatter is not held far under its
// capacity. When steady windows lowered the baseline, it was the luckiest
// window's mean, and against it an ordinary window looked queued: K = 64
// servers of 20 ms scattering ±20 % in slots of 50 ms or 200 ms were held
// at a limit of 32 to 34, half their capacity (±40 %: 10 or 11, 0.15 to
// 0.19 of it). With the baseline a probe's measurement, over 40 seeds each:
// ±20 % does 0.90 to 0.95 of the capacity on average, at least 0.68; ±30 %
// 0.80 to 0.87, at least 0.55; ±40 % 0.68 to 0.84, at least 0.41, which is
// why this property stops at ±30 %.
func TestScatteredDownstreamIsNotHeldFarUnderItsCapacity(t *testing.T) {
	// A table, not rapid: each case is 70 s of the model, too slow under
	// -race for a hundred draws.
	const k, l = 64, 20 * time.Millisecond
	for _, slot := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		for _, spread := range []float64{0.2, 0.3} {
			for seed := uint64(1); seed <= 2; seed++ {
				s := newDsim(mustNew(t, limit.DefaultConfig(4, 1024)), k, scattered(l, slot, spread, seed))
				s.run(10 * time.Second)
				s.reset()
				s.run(60 * time.Second)
				done := s.perSecond() / (k / l.Seconds())
				if done < 0.5 || s.meanLimit() < k/2 {
					t.Errorf("slots of %v scattering ±%.0f %% (seed %d): mean limit %.1f (K = %d), %.2f of the capacity done, want ≥ K/2 and ≥ 0.5",
						slot, 100*spread, seed, s.meanLimit(), k, done)
				}
			}
		}
	}
}
