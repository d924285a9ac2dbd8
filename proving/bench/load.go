package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Load is the machine's 1-minute load average over a run, sampled: other
// work on the same cores slows every figure of the run alike, so the report
// says how busy the machine was.
type Load struct {
	Mean    float64 `json:"mean"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

// SampleLoad samples /proc/loadavg every interval until the returned stop
// is called, which returns the summary (nil when nothing could be read).
func SampleLoad(every time.Duration) (stop func() *Load) {
	var (
		mu   sync.Mutex
		load Load
		sum  float64
	)
	sample := func() {
		v, err := loadAverage()
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		load.Samples++
		sum += v
		load.Max = max(load.Max, v)
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		sample()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() *Load {
		close(done)
		<-exited
		sample()
		mu.Lock()
		defer mu.Unlock()
		if load.Samples == 0 {
			return nil
		}
		load.Mean = sum / float64(load.Samples)
		return &load
	}
}

// loadAverage reads the 1-minute load average.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	return parseLoadAverage(string(b))
}

func parseLoadAverage(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("load average %q", s)
	}
	return strconv.ParseFloat(f[0], 64)
}
