package evaluation

// The listener's own CPU per event (issue 12), on the events loadgen sends
// by default: a Bulk profile of about 100 KB with 400 packages and 150
// repositories, and the answer the platform mock gives for it. Each stage
// the handler goes through is measured on its own, then all together, with
// no network and no database:
//
//	go test -run '^$' -bench . -benchmem ./evaluation/

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// realistic is one event as loadgen renders it by default, and the
// platform mock's answer to its VMaaS request.
type realistic struct {
	ds     *platform.Dataset
	event  []byte
	answer []byte
}

func newRealistic(tb testing.TB) realistic {
	tb.Helper()
	o := loadgen.DefaultOptions()
	ds := platform.NewDataset(o.Seed, platform.DefaultSize())
	item := loadgen.Item{Event: platform.EventSpec{Type: "updated", HostID: platform.HostID(o.Seed, 7), OrgID: "org-7",
		Revision: 2, Timestamp: o.Start.Add(time.Hour), RequestID: "req-7", Bulk: true}}
	event, err := loadgen.Render(ds, o, item)
	if err != nil {
		tb.Fatal(err)
	}
	if n := len(event); n < 90_000 || n > 130_000 {
		tb.Fatalf("the event is %d bytes, not the realistic ~100 KB", n)
	}
	r := realistic{ds: ds, event: event}
	req := updatesRequest(tb, r.upload(tb))
	body, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	mock, err := platform.NewServer(ds, platform.ServerOptions{Shape: o.Shape})
	if err != nil {
		tb.Fatal(err)
	}
	w := httptest.NewRecorder()
	mock.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/v3/updates", bytes.NewReader(body)))
	if w.Code != http.StatusOK {
		tb.Fatalf("the mock answered %d: %s", w.Code, w.Body)
	}
	r.answer = w.Body.Bytes()
	return r
}

// targets are what two hosts' events ask VMaaS, to take in turn: the
// upload's, and the same less one package.
func (r realistic) targets(tb testing.TB) [2]evaluationTarget {
	t := r.upload(tb)
	other := t
	other.packages = t.packages[1:]
	return [2]evaluationTarget{t, other}
}

func (r realistic) upload(tb testing.TB) evaluationTarget {
	tb.Helper()
	ev, err := inventory.DecodeInventoryEvent(r.event, inventory.DefaultValidationOptions())
	if err != nil {
		tb.Fatal(err)
	}
	u, err := newUpload(ev, ev.Host.SystemProfile, ev.Timestamp)
	if err != nil {
		tb.Fatal(err)
	}
	if len(u.Packages) != 400 || len(u.Repos) < 100 {
		tb.Fatalf("upload of %d packages and %d enabled repositories, want 400 and most of 150", len(u.Packages), len(u.Repos))
	}
	return evaluationTarget{packages: u.Packages, repos: u.Repos, modules: u.Modules, arch: u.Arch, releasever: u.Releasever}
}

// updatesRequest builds the request exactly as Handler.evaluate does.
func updatesRequest(tb testing.TB, t evaluationTarget) *clients.UpdatesRequest {
	req := &clients.UpdatesRequest{Releasever: t.releasever, Basearch: t.arch}
	for _, p := range t.packages {
		req.PackageList = append(req.PackageList, p.Name+"-"+p.EVRA)
	}
	for _, m := range t.modules {
		req.ModulesList = append(req.ModulesList, clients.Module{Name: m.Name, Stream: m.Stream})
	}
	if len(req.PackageList) == 0 {
		tb.Fatal("a request without packages")
	}
	return req
}

// cannedVMaaS returns a VMaaS client whose transport answers every request
// with answer, in memory, after reading the request body, so that what is
// measured is the client's own work: encoding, hashing, decoding, caching.
// Its cache holds one answer: requests taken in turn from two hosts miss it
// every time, as most calls do in production (hosts differ), and each
// answer is cloned into it.
func cannedVMaaS(tb testing.TB, answer []byte) *clients.VMaaS {
	tb.Helper()
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(answer)), ContentLength: int64(len(answer)), Request: r}, nil
	})}
	c, err := clients.NewVMaaS("http://vmaas.invalid", clients.VMaaSOptions{HTTPClient: hc, MaxAttempts: 1, CacheSize: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// measureCPU reports, beside the wall-clock ns/op that the machine's other
// work inflates, the CPU time the process spent per iteration (user and
// system, garbage collection included): call it before the loop and defer
// the function it returns.
func measureCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() { b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op") }
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func BenchmarkEventDecode(b *testing.B) {
	r := newRealistic(b)
	opts := inventory.DefaultValidationOptions()
	b.SetBytes(int64(len(r.event)))
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		if _, err := inventory.DecodeInventoryEvent(r.event, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventNewUpload(b *testing.B) {
	r := newRealistic(b)
	ev, err := inventory.DecodeInventoryEvent(r.event, inventory.DefaultValidationOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		if _, err := newUpload(ev, ev.Host.SystemProfile, ev.Timestamp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventVMaaS is the client's side of one evaluation: the request
// built from the upload, encoded and hashed, the answer decoded (in
// memory: no network), and Classify.
func BenchmarkEventVMaaS(b *testing.B) {
	r := newRealistic(b)
	targets := r.targets(b)
	c := cannedVMaaS(b, r.answer)
	b.SetBytes(int64(len(r.answer)))
	b.ReportAllocs()
	defer measureCPU(b)()
	i := 0
	for b.Loop() {
		t := targets[i%2]
		i++
		resp, err := c.Updates(context.Background(), updatesRequest(b, t))
		if err != nil {
			b.Fatal(err)
		}
		Classify(resp, t.repos)
	}
	if s := c.Stats(); s.CacheHits > 0 {
		b.Fatalf("%d cache hits", s.CacheHits)
	}
}

// BenchmarkEventAll is everything the handler computes for one event, from
// the record's bytes to the evaluation it stores.
func BenchmarkEventAll(b *testing.B) {
	r := newRealistic(b)
	opts := inventory.DefaultValidationOptions()
	c := cannedVMaaS(b, r.answer)
	b.SetBytes(int64(len(r.event)))
	b.ReportAllocs()
	defer measureCPU(b)()
	i := 0
	for b.Loop() {
		ev, err := inventory.DecodeInventoryEvent(r.event, opts)
		if err != nil {
			b.Fatal(err)
		}
		u, err := newUpload(ev, ev.Host.SystemProfile, ev.Timestamp)
		if err != nil {
			b.Fatal(err)
		}
		t := evaluationTarget{packages: u.Packages, repos: u.Repos, modules: u.Modules, arch: u.Arch, releasever: u.Releasever}
		if i++; i%2 == 0 {
			t.packages = t.packages[1:] // another host's request: a cache miss
		}
		resp, err := c.Updates(context.Background(), updatesRequest(b, t))
		if err != nil {
			b.Fatal(err)
		}
		Classify(resp, t.repos)
	}
	if s := c.Stats(); s.CacheHits > 0 {
		b.Fatalf("%d cache hits", s.CacheHits)
	}
}

// TestRealisticAnswer guards the benchmarks' inputs: the answer covers every
// package and has updates, and classifying it finds advisories.
func TestRealisticAnswer(t *testing.T) {
	r := newRealistic(t)
	target := r.upload(t)
	resp, err := cannedVMaaS(t, r.answer).Updates(context.Background(), updatesRequest(t, target))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.UpdateList) != 400 {
		t.Errorf("the answer covers %d packages, want 400", len(resp.UpdateList))
	}
	if e := Classify(resp, target.repos); len(e.Advisories) == 0 || e.PackagesUpdatable == 0 {
		t.Errorf("the answer gives %d advisories and %d updatable packages", len(e.Advisories), e.PackagesUpdatable)
	}
	t.Logf("event %d bytes, answer %d bytes", len(r.event), len(r.answer))
}
