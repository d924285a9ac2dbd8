package actors

import (
	"math/rand/v2"
	"time"
)

// backoff returns the wait before attempt number attempt (2 for the first
// retry): exponential from min, capped at max, with jitter drawn uniformly
// from the upper half so that records failing together do not retry together.
func backoff(attempt int, min, max time.Duration) time.Duration {
	if attempt < 2 {
		return 0
	}
	d := min
	for i := 2; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(half+1)
}
