package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The profiler is served only when asked for (but its cmdline), and beside
// it the handler's own paths still answer.
func TestPprofIsServedOnlyWhenAskedFor(t *testing.T) {
	m, err := NewIn(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(m, &Readiness{Bridge: newIdleBridge(t)}, nil)
	plain, profiled := httptest.NewServer(h), httptest.NewServer(WithPprof(h))
	defer plain.Close()
	defer profiled.Close()

	if code, _ := get(t, plain.URL+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("without WithPprof /debug/pprof/ answered %d, want 404", code)
	}
	if code, body := get(t, profiled.URL+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("with WithPprof /debug/pprof/ answered %d %.80q, want 200 and the profiles' index", code, body)
	}
	if code, body := get(t, profiled.URL+"/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("/debug/pprof/heap answered %d %.80q, want a heap profile", code, body)
	}
	// The command line may carry secrets given as flags: not served.
	if code, body := get(t, profiled.URL+"/debug/pprof/cmdline"); code != http.StatusNotFound || strings.Contains(body, os.Args[0]) {
		t.Errorf("/debug/pprof/cmdline answered %d %.80q, want 404 without the command line", code, body)
	}
	if code, body := get(t, profiled.URL+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("with WithPprof /healthz answered %d %q, want 200 ok", code, body)
	}
	if code, body := get(t, profiled.URL+"/metrics"); code != http.StatusOK || !strings.Contains(body, "patchflow_") {
		t.Errorf("with WithPprof /metrics answered %d without patchflow's metrics", code)
	}
}
