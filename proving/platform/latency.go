package platform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Latency is a distribution of response delays.
type Latency struct {
	Kind   string        // fixed, uniform or longtail
	Base   time.Duration // fixed: the delay; uniform: the minimum; longtail: the median
	Spread time.Duration // uniform: max - min; longtail: unused
	Sigma  float64       // longtail: log-normal shape (0.5: p99 about 3x the median)
	Cap    time.Duration // longtail: no delay beyond this
}

// ParseLatency reads "fixed:100ms", "uniform:50ms-150ms" or
// "longtail:100ms" (log-normal around the median, sigma 0.5, capped at 20x).
func ParseLatency(s string) (Latency, error) {
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		return Latency{}, fmt.Errorf("latency %q: want fixed:D, uniform:D1-D2 or longtail:D", s)
	}
	switch kind {
	case "fixed", "longtail":
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return Latency{}, fmt.Errorf("latency %q: bad duration", s)
		}
		return Latency{Kind: kind, Base: d, Sigma: 0.5, Cap: 20 * d}, nil
	case "uniform":
		lo, hi, ok := strings.Cut(arg, "-")
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil || a < 0 || b < a {
			return Latency{}, fmt.Errorf("latency %q: want uniform:MIN-MAX", s)
		}
		return Latency{Kind: kind, Base: a, Spread: b - a}, nil
	}
	return Latency{}, fmt.Errorf("latency %q: unknown kind %q", s, kind)
}

// Sample draws one delay.
func (l Latency) Sample() time.Duration {
	switch l.Kind {
	case "uniform":
		if l.Spread <= 0 {
			return l.Base
		}
		return l.Base + rand.N(l.Spread+1)
	case "longtail":
		d := time.Duration(float64(l.Base) * math.Exp(l.Sigma*rand.NormFloat64()))
		return min(d, l.Cap)
	}
	return l.Base
}

// Mean is the distribution's mean, for reports.
func (l Latency) Mean() time.Duration {
	switch l.Kind {
	case "uniform":
		return l.Base + l.Spread/2
	case "longtail":
		return time.Duration(float64(l.Base) * math.Exp(l.Sigma*l.Sigma/2))
	}
	return l.Base
}

func (l Latency) String() string {
	switch l.Kind {
	case "uniform":
		return fmt.Sprintf("uniform:%v-%v", l.Base, l.Base+l.Spread)
	case "longtail":
		return fmt.Sprintf("longtail:%v", l.Base)
	}
	return fmt.Sprintf("fixed:%v", l.Base)
}
