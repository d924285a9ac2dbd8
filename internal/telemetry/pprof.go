package telemetry

import (
	"net/http"
	"net/http/pprof"
)

// WithPprof serves Go's profiler under /debug/pprof/ beside h (importing
// net/http/pprof for its side effect would register it on
// http.DefaultServeMux, which this server does not use).
func WithPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
