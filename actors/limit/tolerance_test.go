package limit_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/limit"
)

// A tolerance t settles the latency near t × the no-load latency, not
// under it (the limit would then be left where it was at 1) nor far over it,
// with the downstream kept busy.
func TestToleranceHoldsTheLatencyItNames(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const l = 20 * time.Millisecond
		cfg := limit.DefaultConfig(4, 4096)
		cfg.Law = rapid.SampledFrom([]limit.Law{limit.Gradient, limit.AIMD}).Draw(t, "law")
		cfg.Tolerance = rapid.Float64Range(1, 2.5).Draw(t, "tolerance")
		k := rapid.SampledFrom([]int{16, 64, 256}).Draw(t, "K")
		c := mustNew(t, cfg)
		now := time.Unix(0, 0)
		_, lat, tput := run(c, downstream{k: k, l: l}, &now, 60*time.Second, rand.New(rand.NewPCG(5, uint64(k))))
		ratio := lat.Seconds() / l.Seconds()
		if ratio < 0.9*cfg.Tolerance || ratio > 1.5*cfg.Tolerance || tput < 0.95 {
			t.Fatalf("%v, K = %d, tolerance %.2f: mean latency %.2f × L, want within [0.9, 1.5] × the tolerance; throughput %.3f of the best, want ≥ 0.95",
				cfg.Law, k, cfg.Tolerance, ratio, tput)
		}
	})
}

func TestToleranceOutsideItsRangeIsRefused(t *testing.T) {
	for _, tol := range []float64{0.5, 0.999, limit.MaxTolerance + 0.01, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		cfg := limit.DefaultConfig(1, 10)
		cfg.Tolerance = tol
		if _, err := limit.New(cfg); err == nil {
			t.Errorf("tolerance %v accepted", tol)
		}
	}
	for _, tol := range []float64{0, 1, 1.5, limit.MaxTolerance} {
		cfg := limit.DefaultConfig(1, 10)
		cfg.Tolerance = tol
		if _, err := limit.New(cfg); err != nil {
			t.Errorf("tolerance %v refused: %v", tol, err)
		}
	}
}
