package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is a listener's /metrics, as read once.
type scrape []sample

// fetchMetrics reads url (a /metrics endpoint).
func fetchMetrics(url string) (scrape, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(b))
}

// parseMetrics parses the Prometheus text exposition format: one sample a
// line, `name{label="value",...} value [timestamp]`, comments ignored.
func parseMetrics(text string) (scrape, error) {
	var out scrape
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	s.name = line[:i]
	rest := line[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels in %q", line)
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				switch c := rest[i]; {
				case c == '\\' && i+1 < len(rest):
					i++
					if rest[i] == 'n' {
						v.WriteByte('\n')
					} else {
						v.WriteByte(rest[i])
					}
				case c == '"':
					rest, closed = rest[i+1:], true
				default:
					v.WriteByte(c)
				}
				if closed {
					break
				}
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value in %q", line)
			}
			s.labels[name] = v.String()
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %q: %w", line, err)
	}
	s.value = v
	return s, nil
}

// sum adds up the samples of name whose labels match (nil: all).
func (sc scrape) sum(name string, match func(map[string]string) bool) float64 {
	t := 0.0
	for _, s := range sc {
		if s.name == name && (match == nil || match(s.labels)) {
			t += s.value
		}
	}
	return t
}

// byLabel adds up the samples of name by the value of label.
func (sc scrape) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range sc {
		if s.name == name {
			out[s.labels[label]] += s.value
		}
	}
	return out
}

// histogram is a Prometheus histogram, its label sets merged.
type histogram struct {
	bounds     []float64 // upper bounds, ascending, +Inf last
	cumulative []float64 // observations at or below each bound
	sum, count float64
}

// histogramOf merges every label set of histogram name.
func (sc scrape) histogramOf(name string) histogram {
	byBound := map[float64]float64{}
	h := histogram{sum: sc.sum(name+"_sum", nil), count: sc.sum(name+"_count", nil)}
	for _, s := range sc {
		if s.name != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			continue
		}
		byBound[le] += s.value
	}
	for le := range byBound {
		h.bounds = append(h.bounds, le)
	}
	slices.Sort(h.bounds)
	for _, le := range h.bounds {
		h.cumulative = append(h.cumulative, byBound[le])
	}
	return h
}

// mean is the mean observation (0 without any).
func (h histogram) mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / h.count
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: it finds the bucket holding the rank q × count and interpolates
// linearly inside it (from 0 for the first bucket); a rank in the +Inf
// bucket gives the highest finite bound. So it is exact only to the
// bucket: the listener's handler buckets double from 1 ms. NaN without
// observations.
func (h histogram) quantile(q float64) float64 {
	if len(h.bounds) == 0 || h.cumulative[len(h.cumulative)-1] == 0 {
		return math.NaN()
	}
	total := h.cumulative[len(h.cumulative)-1]
	rank := q * total
	for i, c := range h.cumulative {
		if c < rank {
			continue
		}
		if math.IsInf(h.bounds[i], 1) {
			if i == 0 {
				return math.NaN()
			}
			return h.bounds[i-1]
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = h.bounds[i-1], h.cumulative[i-1]
		}
		if c == below {
			return h.bounds[i]
		}
		return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
	}
	return h.bounds[len(h.bounds)-1]
}
