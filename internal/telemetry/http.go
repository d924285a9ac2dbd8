package telemetry

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics, /healthz (the process runs), /readyz, and the
// status page /status with its JSON twin /status.json. settings is the
// effective configuration, secrets already redacted.
func Handler(m *Metrics, ready *Readiness, settings []Setting) http.Handler {
	mux := http.NewServeMux()
	html, js := statusHandlers(&statusSource{ready: ready, settings: settings, validationReasons: m.validationReasons, outbox: m.outboxStatus, topics: m.topicStatus})
	mux.Handle("GET /status", html)
	mux.Handle("GET /status.json", js)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := ready.Check(time.Now())
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	return mux
}
