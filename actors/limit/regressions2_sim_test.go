package limit_test

// A second review's downstream model: the records of the pool hold their
// credit through failures and backoff, as the partition actor holds them, and
// the downstream can shed load (refuse at once when no server is free) and
// change its service time over time.

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

type event struct {
	at       time.Time
	admitted time.Time // of this attempt
	retry    bool      // a record in backoff, to attempt again at at
	failed   bool      // an attempt refused by the downstream
}

type events []event

func (h events) Len() int           { return len(h) }
func (h events) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h events) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)        { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

type dsim struct {
	c    *limit.Controller
	now  time.Time
	rng  *rand.Rand
	free servers
	ev   events // one pending event per record holding a credit
	// svc is the service time of an attempt starting at start (its ±50 %
	// spread applied by the caller).
	svc func(start time.Time) time.Duration
	// shed: an attempt finding no server free is refused at once (after
	// 1 ms) as a transient failure, and retried after backoff.
	shed    bool
	backoff time.Duration
	// flaky is the share of attempts refused at once (after 1 ms) as a
	// transient failure whatever the load, and retried after backoff.
	flaky  float64
	steady bool // the controller's phase was Steady at the last step

	// what happened since the last reset
	attempts, failures, successes int
	probing, probes, steps        int // probes: how many began
	limitSum                      float64
	maxLatency, latencySum        time.Duration
}

func newDsim(c *limit.Controller, k int, svc func(time.Time) time.Duration) *dsim {
	s := &dsim{c: c, now: time.Unix(0, 0), rng: rand.New(rand.NewPCG(7, uint64(k))), svc: svc, backoff: 100 * time.Millisecond}
	s.free = make(servers, k)
	for i := range s.free {
		s.free[i] = s.now
	}
	heap.Init(&s.free)
	return s
}

func (s *dsim) reset() {
	s.attempts, s.failures, s.successes, s.probing, s.probes, s.steps, s.limitSum, s.maxLatency, s.latencySum = 0, 0, 0, 0, 0, 0, 0, 0, 0
}

func (s *dsim) attempt() {
	s.attempts++
	if (s.shed && s.free[0].After(s.now)) || (s.flaky > 0 && s.rng.Float64() < s.flaky) {
		heap.Push(&s.ev, event{at: s.now.Add(time.Millisecond), admitted: s.now, failed: true})
		return
	}
	start := s.free[0]
	if start.Before(s.now) {
		start = s.now
	}
	svc := time.Duration(float64(s.svc(start)) * (0.5 + s.rng.Float64()))
	s.free[0] = start.Add(svc)
	heap.Fix(&s.free, 0)
	heap.Push(&s.ev, event{at: start.Add(svc), admitted: s.now})
}

// run advances the model by dur in 1 ms steps.
func (s *dsim) run(dur time.Duration) {
	const step = time.Millisecond
	for end := s.now.Add(dur); s.now.Before(end); s.now = s.now.Add(step) {
		for s.ev.Len() > 0 && !s.ev[0].at.After(s.now) {
			e := heap.Pop(&s.ev).(event)
			switch {
			case e.retry:
				s.attempt()
			case e.failed:
				s.failures++
				s.c.Observe(s.now, limit.Sample{Latency: s.now.Sub(e.admitted), Congested: true, InFlight: s.ev.Len() + 1})
				heap.Push(&s.ev, event{at: s.now.Add(time.Duration(s.rng.Float64() * float64(s.backoff))), retry: true})
			default:
				s.successes++
				lat := s.now.Sub(e.admitted)
				s.maxLatency = max(s.maxLatency, lat)
				s.latencySum += lat
				s.c.Observe(s.now, limit.Sample{Latency: lat, InFlight: s.ev.Len()})
			}
		}
		for s.ev.Len() < s.c.Limit() {
			s.attempt()
		}
		s.steps++
		s.limitSum += float64(s.c.Limit())
		if s.c.Phase() != limit.Steady {
			if s.steady {
				s.probes++
			}
			s.probing++
		}
		s.steady = s.c.Phase() == limit.Steady
	}
}

func (s *dsim) meanLimit() float64 { return s.limitSum / float64(s.steps) }
func (s *dsim) meanLatency() time.Duration {
	return s.latencySum / time.Duration(max(1, s.successes))
}
func (s *dsim) probingShare() float64 { return float64(s.probing) / float64(s.steps) }
func (s *dsim) failureShare() float64 { return float64(s.failures) / float64(max(1, s.attempts)) }
func (s *dsim) perSecond() float64    { return float64(s.successes) / (float64(s.steps) / 1000) }
func flat(l time.Duration) func(time.Time) time.Duration {
	return func(time.Time) time.Duration { return l }
}
