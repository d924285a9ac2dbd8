package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// downstream is a fluid model of a service with k servers of service time
// l and a FIFO queue, kept full by a backlog: with c records in flight it
// completes min(c, k)/l records a second, each after l × max(1, c/k).
type downstream struct {
	k int
	l time.Duration
}

func (d downstream) latency(c int) time.Duration {
	return time.Duration(float64(d.l) * math.Max(1, float64(c)/float64(d.k)))
}

func (d downstream) rate(c int) float64 { return float64(min(c, d.k)) / d.l.Seconds() }

// run drives c against d for dur in steps of 1 ms, with 5 % noise on each
// latency, and returns the limit's and the latency's means over the last
// half of dur, and the throughput over it against the best fixed
// concurrency's (k).
func run(c *limit.Controller, d downstream, now *time.Time, dur time.Duration, rng *rand.Rand) (meanLimit float64, meanLatency time.Duration, throughput float64) {
	const step = time.Millisecond
	var due, done float64
	var limits, lats float64
	var n, latN int
	half := *now
	half = half.Add(dur / 2)
	for end := now.Add(dur); now.Before(end); {
		*now = now.Add(step)
		inFlight := c.Limit()
		due += d.rate(inFlight) * step.Seconds()
		for ; due >= 1; due-- {
			lat := time.Duration(float64(d.latency(inFlight)) * (0.95 + 0.1*rng.Float64()))
			c.Observe(*now, limit.Sample{Latency: lat, InFlight: inFlight})
			if !now.Before(half) {
				done++
				lats += lat.Seconds()
				latN++
			}
		}
		if !now.Before(half) {
			limits += float64(c.Limit())
			n++
		}
	}
	best := d.rate(d.k) * (dur / 2).Seconds()
	return limits / float64(n), time.Duration(lats / float64(latN) * float64(time.Second)), done / best
}

// The default law, against a downstream whose capacity changes the way
// make bench's capacity scenario changes it: the limit settles near each
// capacity, the downstream stays busy, and the queue stays short.
func TestGradientFollowsAChangingCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := mustNew(t, limit.DefaultConfig(8, 1024))
	now := time.Unix(0, 0)
	l := 20 * time.Millisecond
	for _, k := range []int{64, 16, 128, 64} {
		d := downstream{k: k, l: l}
		mean, lat, tput := run(c, d, &now, 20*time.Second, rng)
		t.Logf("K=%d: limit %.1f, latency %v (%.2f × L), throughput %.3f of the best", k, mean, lat, lat.Seconds()/l.Seconds(), tput)
		if mean < 0.5*float64(k) || mean > 1.5*float64(k) {
			t.Errorf("K=%d: mean limit %.1f outside ±50%% of K", k, mean)
		}
		if tput < 0.9 {
			t.Errorf("K=%d: throughput %.3f of the best fixed concurrency, want ≥ 0.9", k, tput)
		}
		if lat > l*3/2 {
			t.Errorf("K=%d: mean latency %v, want ≤ 1.5 × %v", k, lat, l)
		}
	}
}

// Every law stays within ±50 % of a fixed capacity on the model; the
// benchmark, not this test, chooses between them.
func TestEveryLawSettlesNearAFixedCapacity(t *testing.T) {
	for _, law := range laws {
		for _, k := range []int{16, 64, 256} {
			t.Run(fmt.Sprintf("%v/K=%d", law, k), func(t *testing.T) {
				cfg := limit.DefaultConfig(4, 4096)
				cfg.Law = law
				c := mustNew(t, cfg)
				now := time.Unix(0, 0)
				mean, lat, tput := run(c, downstream{k: k, l: 20 * time.Millisecond}, &now, 60*time.Second, rand.New(rand.NewPCG(3, uint64(k))))
				t.Logf("limit %.1f, latency %v, throughput %.3f", mean, lat, tput)
				if mean < 0.5*float64(k) || mean > 1.5*float64(k) {
					t.Errorf("mean limit %.1f outside ±50%% of K=%d", mean, k)
				}
			})
		}
	}
}
