package limit_test

import (
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A downstream with a short hiccup every 5 s (all attempts refused for
// 150 ms: a failover, a GC pause behind a proxy), then slower for everyone.
// Each hiccup is a trouble the limit recovers from; the probes must still
// come, or the baseline goes stale and the gradient law pins the limit far
// under the capacity. Putting the probe a whole ProbeInterval after each
// recovery did that: 0 probes in a minute, the limit at its floor (8
// against 64 servers, 134/s of 1,067).
func TestPeriodicHiccupsDoNotStarveProbes(t *testing.T) {
	// Every 5 s, and every 2 s: putting the probe off a quarter interval
	// after each recovery, however overdue, starved it at 2 s as a whole
	// interval did at 5 s.
	for _, every := range []time.Duration{5 * time.Second, 2 * time.Second} {
		t.Run(every.String(), func(t *testing.T) { hiccupsDoNotStarveProbes(t, every) })
	}
}

func hiccupsDoNotStarveProbes(t *testing.T, every time.Duration) {
	cfg := limit.DefaultConfig(8, 1024)
	c := mustNew(t, cfg)
	slow := time.Unix(0, 0).Add(20 * time.Second)
	s := newDsim(c, 64, func(start time.Time) time.Duration {
		if start.Before(slow) {
			return 20 * time.Millisecond
		}
		return 60 * time.Millisecond // slower for everyone from 20 s
	})
	hiccups := func(d time.Duration) {
		for end := s.now.Add(d); s.now.Before(end); {
			s.flaky = 0
			s.run(every - 150*time.Millisecond)
			s.flaky = 1
			s.run(150 * time.Millisecond)
		}
		s.flaky = 0
	}
	hiccups(20 * time.Second)
	t.Logf("before the slow-down: %d probes, mean limit %.0f, baseline %v", s.probes, s.meanLimit(), c.Baseline())
	s.reset()
	hiccups(60 * time.Second)
	t.Logf("60 s after it: %d probes, mean limit %.0f, %.0f/s, baseline %v latency %v limit %d", s.probes, s.meanLimit(), s.perSecond(), c.Baseline(), c.Latency(), c.Limit())
	if s.probes == 0 {
		t.Errorf("no probe in the 60 s (6 probe intervals) after the downstream slowed down; baseline still %v", c.Baseline())
	}
	if m := s.meanLimit(); m < 32 {
		t.Errorf("mean limit %.0f over 60 s against 64 servers at 60 ms (capacity %.0f/s, served %.0f/s)", m, 64/0.06, s.perSecond())
	}
}
