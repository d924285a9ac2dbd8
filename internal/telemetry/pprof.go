package telemetry

import (
	"net/http"
	"net/http/pprof"
)

// WithPprof serves Go's profiler under /debug/pprof/ beside h (importing
// net/http/pprof for its side effect would register it on
// http.DefaultServeMux, which this server does not use).
//
// /debug/pprof/cmdline is not served: it would answer the command line
// whole, and a secret given as a flag (-database-url with its password,
// -kafka-sasl-password, -release-token) with it. Masking the secrets in it
// would have to know every form a flag takes (-name=value, -name value,
// --name) and every secret setting, this build's and any extension's, and
// one missed is a secret on an unauthenticated port; what an operator looks
// for there, the settings in force, /status shows, its secrets masked.
func WithPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not served: the command line may carry secrets; /status shows the settings in force, secrets masked", http.StatusNotFound)
	})
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
