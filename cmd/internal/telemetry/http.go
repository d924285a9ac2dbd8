package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patchflow/patchflow/actors"
)

// Readiness decides /readyz.
type Readiness struct {
	Bridge *actors.Bridge
	// Ping checks the database; nil when there is none (simulated handler).
	Ping func(context.Context) error
	// PinLimit: a partition whose oldest unfinished record has held the
	// watermark longer than this makes the process not ready; so does one
	// that has had records waiting and none admitted for that long.
	PinLimit time.Duration
	// Stalls remembers partitions that admit nothing; nil: not judged.
	Stalls *StallWatch
}

// Check returns whether the process is ready, and why not.
func (r Readiness) Check(ctx context.Context) (bool, string) {
	if !r.Bridge.Joined() {
		return false, "not joined to the consumer group"
	}
	now := time.Now()
	states := r.Bridge.Partitions()
	for _, p := range states {
		if d := p.PinnedFor(now); r.PinLimit > 0 && d > r.PinLimit {
			return false, fmt.Sprintf("%s/%d: watermark pinned for %v by offset %d (key %q)", p.Topic, p.Partition, d.Round(100*time.Millisecond), p.PinnedOffset, p.PinnedKey)
		}
	}
	if r.Stalls != nil {
		if stalled, why := r.Stalls.Stalled(states, now, r.PinLimit); stalled {
			return false, why
		}
	}
	if r.Ping != nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := r.Ping(pctx); err != nil {
			return false, "database unreachable"
		}
	}
	return true, "ready"
}

// Handler serves /metrics, /healthz (the process runs), /readyz, and the
// status page /status with its JSON twin /status.json. settings is the
// effective configuration, secrets already redacted.
func Handler(m *Metrics, ready Readiness, settings []Setting) http.Handler {
	mux := http.NewServeMux()
	html, js := StatusHandlers(ready, settings)
	mux.Handle("GET /status", html)
	mux.Handle("GET /status.json", js)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := ready.Check(r.Context())
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	return mux
}
