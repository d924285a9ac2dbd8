package limit_test

// Regressions of the adaptive limit's controller, each found failing first.

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A steady background of transient failures, 0.5 % of attempts, with the
// latency flat at its baseline the whole time (the downstream is not loaded
// at all): the limit must not collapse. It did while a window holding one
// failure could only shrink it, never let the law raise it: it walked down
// to the floor and stayed there.
func TestBackgroundFailuresDoNotPinTheLimitAtTheFloor(t *testing.T) {
	c := mustNew(t, limit.DefaultConfig(8, 1024))
	now := time.Unix(0, 0)
	for i := 0; i < 3_000_000; i++ { // 5 minutes at 10,000 attempts a second
		now = now.Add(100 * time.Microsecond)
		c.Observe(now, limit.Sample{Latency: 10 * time.Millisecond, Congested: i%200 == 199, InFlight: c.Limit()})
	}
	t.Logf("after 5 min of 0.5%% transient failures at a flat 10ms: limit %d, baseline %v, latency %v, windows %d",
		c.Limit(), c.Baseline(), c.Latency(), c.Windows())
	if c.Limit() < limit.DefaultInitial {
		t.Fatalf("limit %d: 0.5%% background failures with latency never above its baseline drove it below its initial %d (floor 8)",
			c.Limit(), limit.DefaultInitial)
	}
}

// completions is a min-heap of the finish times of records in flight.
type completions []record

type record struct{ admitted, done time.Time }

func (h completions) Len() int           { return len(h) }
func (h completions) Less(i, j int) bool { return h[i].done.Before(h[j].done) }
func (h completions) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *completions) Push(x any)        { *h = append(*h, x.(record)) }
func (h *completions) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// servers is a min-heap of when each of the downstream's k servers is free.
type servers []time.Time

func (h servers) Len() int           { return len(h) }
func (h servers) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h servers) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *servers) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *servers) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// simulate runs the controller against a FIFO downstream of k servers of
// service time l, with an unbounded backlog, as the pool runs it: a record
// is admitted while fewer than the limit are in flight (lowering takes
// nothing back), queues for a server, and its sample (its whole time, the
// queueing included) arrives when it finishes. It returns the mean limit and
// the mean latency over the second half.
func simulate(c *limit.Controller, k int, l, dur time.Duration) (float64, time.Duration) {
	return simulateFrom(c, time.Unix(0, 0), k, l, dur)
}

func simulateFrom(c *limit.Controller, now time.Time, k int, l, dur time.Duration) (float64, time.Duration) {
	rng := rand.New(rand.NewPCG(13, uint64(k)))
	free := make(servers, k)
	for i := range free {
		free[i] = now
	}
	heap.Init(&free)
	var inFlight completions
	const step = time.Millisecond
	var limits, lats float64
	var n, ln int
	half := now.Add(dur / 2)
	for end := now.Add(dur); now.Before(end); now = now.Add(step) {
		for inFlight.Len() > 0 && !inFlight[0].done.After(now) {
			r := heap.Pop(&inFlight).(record)
			lat := r.done.Sub(r.admitted)
			c.Observe(now, limit.Sample{Latency: lat, InFlight: inFlight.Len()})
			if !now.Before(half) {
				lats += lat.Seconds()
				ln++
			}
		}
		for inFlight.Len() < c.Limit() {
			start := free[0]
			if start.Before(now) {
				start = now
			}
			svc := time.Duration(float64(l) * (0.5 + rng.Float64())) // exponential-ish spread: 0.5-1.5 × l
			free[0] = start.Add(svc)
			heap.Fix(&free, 0)
			heap.Push(&inFlight, record{admitted: now, done: start.Add(svc)})
		}
		if !now.Before(half) {
			limits += float64(c.Limit())
			n++
		}
	}
	return limits / float64(n), time.Duration(lats / math.Max(1, float64(ln)) * float64(time.Second))
}

// With records in flight for longer than MaxWindow/2 (a slow downstream:
// 1-5 s of service, spread ±50 %), the limit stays near K and the latency
// near the service time. It ran to the ceiling while windows were capped at
// MaxWindow (1 s): the probe's drain and measuring windows closed long
// before the records admitted over the halved limit answered, the probe
// took the loaded latency for the no-load baseline, and each probe ratcheted
// the baseline up.
func TestSlowDownstreamSettlesNearCapacity(t *testing.T) {
	for _, law := range laws {
		for _, l := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second} {
			for _, k := range []int{16, 64} {
				cfg := limit.DefaultConfig(4, 1024)
				cfg.Law = law
				c := mustNew(t, cfg)
				mean, lat := simulate(c, k, l, 30*time.Minute)
				t.Logf("%v L=%v K=%d: mean limit %.1f (%.1f × K), mean latency %.1f × L, baseline at the end %v (%.1f × L)",
					law, l, k, mean, mean/float64(k), lat.Seconds()/l.Seconds(), c.Baseline().Round(time.Millisecond), c.Baseline().Seconds()/l.Seconds())
				if lat > 3*l || c.Baseline() > 2*l {
					t.Errorf("%v L=%v K=%d: the limit ran to %.0f (%.1f × K) with the downstream overloaded: latency %.1f × L, baseline %.1f × L",
						law, l, k, mean, mean/float64(k), lat.Seconds()/l.Seconds(), c.Baseline().Seconds()/l.Seconds())
				}
			}
		}
	}
}

// After an outage (every attempt a transient failure, the limit at the
// floor), the limit comes back once attempts succeed at the baseline again:
// against a FIFO downstream of K = 64, within two minutes.
func TestLimitRecoversAfterAnOutage(t *testing.T) {
	for _, law := range laws {
		cfg := limit.DefaultConfig(8, 1024)
		cfg.Law = law
		c := mustNew(t, cfg)
		simulate(c, 64, 20*time.Millisecond, time.Minute)
		before := c.Limit()
		now := time.Unix(1000, 0)
		for i := 0; i < 60_000; i++ { // a minute of failures, 1,000 a second
			now = now.Add(time.Millisecond)
			c.Observe(now, limit.Sample{Latency: time.Millisecond, Congested: true, InFlight: c.Limit()})
		}
		if c.Limit() != cfg.Floor {
			t.Fatalf("%v: limit %d after a minute of failures, want the floor", law, c.Limit())
		}
		mean, _ := simulateFrom(c, now, 64, 20*time.Millisecond, 2*time.Minute)
		t.Logf("%v: limit %d before the outage, %d at its end, mean %.1f over the second minute after it", law, before, cfg.Floor, mean)
		if mean < 32 {
			t.Errorf("%v: mean limit %.1f a minute after the outage, K = 64", law, mean)
		}
	}
}
