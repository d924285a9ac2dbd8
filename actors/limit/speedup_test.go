package limit_test

import (
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/limit"
)

// A downstream getting faster for a long time (its service time falling
// linearly from 2 s to 20 ms over 50 s: with windows of two round trips,
// each window's mean about 8 % under the last's), K = 256 servers, so
// that the limit the controller starts at (32) is an eighth of the
// capacity. When every falling window held the limit (f456921), it stayed
// under K/2 for 48 of the 50 s and the downstream did 0.33 of what it
// could over the fall (0.68 without the rule); holding at most four in a
// row, 0.57.
func TestLongSpeedUpDoesNotStarveTheDownstream(t *testing.T) {
	const (
		k    = 256
		l    = 20 * time.Millisecond
		from = 2 * time.Second
		rate = 0.04 // seconds of service time lost per second
	)
	s := newDsim(mustNew(t, limit.DefaultConfig(4, 4096)), k, nil)
	start := s.now
	svc := func(at time.Time) time.Duration {
		return max(l, from-time.Duration(rate*float64(at.Sub(start))))
	}
	s.svc = svc
	var capacity float64
	for s.now.Sub(start) < time.Duration(float64(from-l)/rate) {
		s.run(100 * time.Millisecond)
		capacity += float64(k) / svc(s.now).Seconds() * 0.1
	}
	share := float64(s.successes) / capacity
	t.Logf("over the fall: %.2f of the capacity done, mean limit %.1f (K = %d)", share, s.meanLimit(), k)
	if share < 0.5 {
		t.Errorf("the downstream did %.2f of its capacity while it got faster (want ≥ 0.5): the limit stayed far under K = %d", share, k)
	}
}
