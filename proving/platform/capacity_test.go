package platform

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// callsAtOnce posts n VMaaS calls at once and returns their status codes
// (0 for a call that failed, reported) once all are answered, and the most
// calls served at once meanwhile.
func callsAtOnce(t *testing.T, srv *Server, url string, packages []string, n int) (codes []int, peak int) {
	t.Helper()
	codes = make([]int, n)
	body, _ := json.Marshal(map[string]any{"package_list": packages})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := http.Post(url+"/api/v3/updates", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	for {
		peak = max(peak, srv.Stats().VMaaSServing)
		select {
		case <-answered:
			return codes, peak
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// With a capacity of 2 and a fixed latency of 50 ms, six VMaaS calls at once
// are served two at a time: all six are answered, never more than two are
// served at once, and together they take at least three latencies. The
// capacity changes at run time through POST /admin/faults, and a negative
// one is refused.
func TestCapacityQueuesVMaaSCalls(t *testing.T) {
	ds := NewDataset(3, DatasetSize{Packages: 100, Repos: 10, Advisories: 50})
	shape := ProfileShape{Packages: 20, Repos: 5}
	const latency = 50 * time.Millisecond
	srv, err := NewServer(ds, ServerOptions{Shape: shape, Faults: Faults{Latency: "fixed:50ms", Capacity: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	packages := ds.Profile(host, 0, shape).Packages

	began := time.Now()
	codes, peak := callsAtOnce(t, srv, ts.URL, packages, 6)
	took := time.Since(began)
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("call %d: status %d", i, c)
		}
	}
	if peak > 2 || peak == 0 {
		t.Fatalf("%d calls served at once with a capacity of 2", peak)
	}
	if took < 3*latency {
		t.Fatalf("six calls at a capacity of 2 took %v, less than three latencies (%v)", took, 3*latency)
	}
	if s := srv.Stats(); s.VMaaSCalls != 6 || s.VMaaSServing != 0 || s.VMaaSQueued != 0 {
		t.Fatalf("after the calls: stats %+v", s)
	}

	// At run time: capacity 1 with a long latency queues three calls behind
	// the first; raising it (here to none) serves them at once.
	if code, body := post(t, ts.URL+"/admin/faults", Faults{Latency: "fixed:1s", Capacity: 1}); code != 200 {
		t.Fatalf("set capacity 1: %d %s", code, body)
	}
	done := make(chan []int, 1)
	go func() { c, _ := callsAtOnce(t, srv, ts.URL, packages, 4); done <- c }()
	waitFor(t, "one call served, three queued", func() bool { s := srv.Stats(); return s.VMaaSServing == 1 && s.VMaaSQueued == 3 })
	resp, err := http.Get(ts.URL + "/admin/stats")
	if err != nil {
		t.Fatal(err)
	}
	var stats map[string]any
	err = json.NewDecoder(resp.Body).Decode(&stats)
	resp.Body.Close()
	if err != nil || stats["vmaas_serving"] != 1.0 || stats["vmaas_queued"] != 3.0 {
		t.Fatalf("/admin/stats %v (%v), want vmaas_serving 1 and vmaas_queued 3", stats, err)
	}
	if code, body := post(t, ts.URL+"/admin/faults", Faults{Latency: "fixed:1s"}); code != 200 {
		t.Fatalf("set capacity 0: %d %s", code, body)
	}
	// The queued calls are granted as the limit is raised, before the
	// answer to POST /admin/faults; the first is still in its second.
	if s := srv.Stats(); s.VMaaSQueued != 0 || s.VMaaSServing != 4 {
		t.Fatalf("after raising the capacity: serving %d, queued %d, want 4, 0", s.VMaaSServing, s.VMaaSQueued)
	}
	for i, c := range <-done {
		if c != http.StatusOK {
			t.Fatalf("call %d: status %d", i, c)
		}
	}

	// Lowering it applies to the next calls.
	if code, body := post(t, ts.URL+"/admin/faults", Faults{Latency: "fixed:20ms", Capacity: 1}); code != 200 {
		t.Fatalf("set capacity 1: %d %s", code, body)
	}
	if _, peak := callsAtOnce(t, srv, ts.URL, packages, 3); peak != 1 {
		t.Fatalf("%d calls served at once with a capacity of 1", peak)
	}

	if code, _ := post(t, ts.URL+"/admin/faults", Faults{Capacity: -1}); code != http.StatusBadRequest {
		t.Fatalf("capacity -1: status %d, want 400", code)
	}
	if _, err := NewServer(ds, ServerOptions{Faults: Faults{Capacity: -1}}); err == nil {
		t.Fatal("NewServer accepted capacity -1")
	}
}

// Calls for hung hosts take no slot: with a capacity of 1 and a hung call
// waiting, other calls are served.
func TestHungCallsTakeNoSlot(t *testing.T) {
	ds := NewDataset(3, DatasetSize{Packages: 100, Repos: 10, Advisories: 50})
	shape := ProfileShape{Packages: 20, Repos: 5}
	srv, err := NewServer(ds, ServerOptions{Shape: shape, Faults: Faults{Capacity: 1, HangHosts: []string{host}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	hung := make(chan struct{})
	go func() {
		defer close(hung)
		c := &http.Client{Timeout: 2 * time.Second}
		b, _ := json.Marshal(map[string]any{"package_list": ds.Profile(host, 0, shape).Packages})
		if resp, err := c.Post(ts.URL+"/api/v3/updates", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the hung call arrives", func() bool { return srv.Stats().VMaaSHung == 1 })
	for range 2 {
		if code, _ := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": ds.Profile("8a3f1c2e-0000-4000-8000-000000000002", 0, shape).Packages}); code != http.StatusOK {
			t.Fatalf("a call beside a hung one: status %d", code)
		}
	}
	if s := srv.Stats(); s.VMaaSServing != 0 || s.VMaaSQueued != 0 {
		t.Fatalf("with a hung call waiting: serving %d, queued %d, want 0, 0", s.VMaaSServing, s.VMaaSQueued)
	}
	ts.CloseClientConnections()
	<-hung
}
