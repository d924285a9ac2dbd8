package clients_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
)

// Ping is one request on the updates path: nil for an answer with an
// update list, an error for anything else; never retried, cached or
// reported as an evaluation's call.
func TestVMaaSPing(t *testing.T) {
	var mu sync.Mutex
	status, body := http.StatusOK, sampleBody
	set := func(s int, b string) { mu.Lock(); status, body = s, b; mu.Unlock() }
	srv, requests := countingServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		var req clients.UpdatesRequest
		if r.URL.Path != "/api/v3/updates" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.PackageList) != 1 {
			http.Error(w, "not the updates path", http.StatusNotFound)
			return
		}
		mu.Lock()
		s, b := status, body
		mu.Unlock()
		w.WriteHeader(s)
		_, _ = w.Write([]byte(b))
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{MaxAttempts: 5, CacheSize: 10, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond})
	reported := 0
	c.ReportTo(func(context.Context, time.Duration, error) { reported++ })
	ctx := context.Background()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping of a serving VMaaS: %v", err)
	}
	if err := c.Ping(ctx); err != nil || requests() != 2 {
		t.Fatalf("second ping: %v after %d requests, want 2 (no cache)", err, requests())
	}
	set(http.StatusServiceUnavailable, sampleBody)
	if err := c.Ping(ctx); err == nil || !strings.Contains(err.Error(), "503") || requests() != 3 {
		t.Fatalf("ping of a 503: %v after %d requests, want an error naming 503 and no retry", err, requests())
	}
	set(http.StatusOK, `{}`)
	if err := c.Ping(ctx); err == nil {
		t.Fatal("ping of an answer without update_list passed")
	}
	if reported != 0 || c.Stats().Requests != 0 {
		t.Fatalf("pings reported %d times, counted %d requests: they are not calls", reported, c.Stats().Requests)
	}
}
