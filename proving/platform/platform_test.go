package platform

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
)

const host = "8a3f1c2e-0000-4000-8000-000000000001"

func TestDatasetIsDeterministic(t *testing.T) {
	a, b := NewDataset(7, DefaultSize()), NewDataset(7, DefaultSize())
	if !reflect.DeepEqual(a.Packages, b.Packages) || !reflect.DeepEqual(a.Advisories, b.Advisories) {
		t.Fatal("same seed, different datasets")
	}
	if c := NewDataset(8, DefaultSize()); reflect.DeepEqual(a.Packages, c.Packages) {
		t.Fatal("different seeds, same dataset")
	}
	pa, pb := a.Profile(host, 2, DefaultShape()), b.Profile(host, 2, DefaultShape())
	if !reflect.DeepEqual(pa, pb) || len(pa.Packages) != 400 || len(pa.Repos) != 150 {
		t.Fatalf("profiles differ or have the wrong shape: %d packages, %d repos", len(pa.Packages), len(pa.Repos))
	}
	if p0 := a.Profile(host, 0, DefaultShape()); reflect.DeepEqual(p0.Packages, pa.Packages) {
		t.Fatal("a later revision updated no package")
	}
}

func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// The server answers the same request the same way, and its answer agrees
// with Evaluate.
func TestUpdatesAnswerIsStableAndMatchesEvaluate(t *testing.T) {
	ds := NewDataset(3, DatasetSize{Packages: 300, Repos: 20, Advisories: 200})
	srv, err := NewServer(ds, ServerOptions{Shape: ProfileShape{Packages: 50, Repos: 10}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p := ds.Profile(host, 0, ProfileShape{Packages: 50, Repos: 10})
	req := map[string]any{"package_list": p.Packages}
	code, first := post(t, ts.URL+"/api/v3/updates", req)
	_, second := post(t, ts.URL+"/api/v3/updates", req)
	if code != 200 || !bytes.Equal(first, second) {
		t.Fatalf("status %d; answers equal: %v", code, bytes.Equal(first, second))
	}
	var resp updatesResponse
	if err := json.Unmarshal(first, &resp); err != nil {
		t.Fatal(err)
	}
	enabled := map[string]bool{}
	for _, r := range p.EnabledRepos() {
		enabled[r] = true
	}
	got := map[string]string{}
	for _, pu := range resp.UpdateList {
		for _, u := range pu.AvailableUpdates {
			if u.Erratum == "" {
				continue
			}
			if enabled[u.Repository] {
				got[u.Erratum] = "installable"
			} else if got[u.Erratum] == "" {
				got[u.Erratum] = "applicable"
			}
		}
	}
	want := ds.Evaluate(p.Packages, p.EnabledRepos()).Advisories
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("server answer implies %d advisories, Evaluate says %d", len(got), len(want))
	}
	if code, _ := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": []string{}}); code != 400 {
		t.Fatalf("empty package list: %d, want 400", code)
	}
}

func TestFaultsAndInventory(t *testing.T) {
	ds := NewDataset(3, DatasetSize{Packages: 100, Repos: 10, Advisories: 50})
	srv, _ := NewServer(ds, ServerOptions{Shape: ProfileShape{Packages: 20, Repos: 5}, BulkProfiles: true})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	if code, _ := post(t, ts.URL+"/admin/faults", Faults{ErrorRate: 1, Latency: "fixed:30ms"}); code != 200 {
		t.Fatal("set faults")
	}
	start := time.Now()
	if code, _ := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": []string{"bash-0:1.0.0-1.el8.x86_64"}}); code != 503 {
		t.Fatalf("with error rate 1: %d, want 503", code)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("latency fault not applied")
	}
	post(t, ts.URL+"/admin/faults", Faults{})
	resp, err := http.Get(ts.URL + "/api/inventory/v1/hosts/" + host + "/system_profile")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Results []struct {
			ID            string           `json:"id"`
			SystemProfile SystemProfileDoc `json:"system_profile"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Results) != 1 {
		t.Fatalf("inventory answer: %v", err)
	}
	want := ds.Profile(host, 0, ProfileShape{Packages: 20, Repos: 5})
	if got := body.Results[0].SystemProfile.InstalledPackages; !reflect.DeepEqual(got, want.Packages) {
		t.Fatalf("inventory profile packages %v, want %v", got, want.Packages)
	}
	if s := srv.Stats(); s.VMaaS503 != 1 || s.InventoryCalls != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestParseLatency(t *testing.T) {
	for _, s := range []string{"fixed:100ms", "uniform:50ms-150ms", "longtail:100ms"} {
		l, err := ParseLatency(s)
		if err != nil || l.String() != s {
			t.Fatalf("%s: %v %v", s, l, err)
		}
		for range 100 {
			if d := l.Sample(); d < 0 || d > 2*time.Second {
				t.Fatalf("%s sampled %v", s, d)
			}
		}
	}
	for _, bad := range []string{"100ms", "uniform:2s-1s", "gauss:1s", "fixed:soon"} {
		if _, err := ParseLatency(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// HangHosts leaves unanswered every VMaaS call for the chosen host's
// profiles, whatever their revision or package order, and answers others.
func TestHangHostsLeavesOnlyTheirCallsUnanswered(t *testing.T) {
	ds := NewDataset(3, DefaultSize())
	shape := ProfileShape{Packages: 30, Repos: 5}
	other := "8a3f1c2e-0000-4000-8000-000000000002"
	srv, err := NewServer(ds, ServerOptions{Shape: shape, Faults: Faults{HangHosts: []string{host}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	call := func(packages []string) (int, error) {
		b, _ := json.Marshal(map[string]any{"package_list": packages})
		c := &http.Client{Timeout: 300 * time.Millisecond}
		resp, err := c.Post(ts.URL+"/api/v3/updates", "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	hung := ds.Profile(host, 3, shape).Packages
	reversed := append([]string(nil), hung...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	if _, err := call(reversed); err == nil {
		t.Fatal("a call for a hung host's profile was answered")
	}
	if code, err := call(ds.Profile(other, 3, shape).Packages); err != nil || code != http.StatusOK {
		t.Fatalf("another host's call: status %d, error %v", code, err)
	}
	if s := srv.Stats(); s.VMaaSHung != 1 {
		t.Fatalf("hung calls %d, want 1", s.VMaaSHung)
	}
}

// A caller named by its path prefix is served as any other, and the mock
// records the evaluations it answered for it (not 503s, not unnamed calls).
func TestNamedCallersEvaluationsAreRecorded(t *testing.T) {
	ds := NewDataset(3, DatasetSize{Packages: 100, Repos: 10, Advisories: 50})
	shape := ProfileShape{Packages: 20, Repos: 5}
	srv, err := NewServer(ds, ServerOptions{Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p0, p1 := ds.Profile(host, 0, shape).Packages, ds.Profile("8a3f1c2e-0000-4000-8000-000000000002", 0, shape).Packages
	if code, _ := post(t, ts.URL+"/l/listener-1/api/v3/updates", map[string]any{"package_list": p0}); code != 200 {
		t.Fatalf("named call: %d", code)
	}
	if code, _ := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": p1}); code != 200 {
		t.Fatalf("unnamed call: %d", code)
	}
	post(t, ts.URL+"/admin/faults", Faults{ErrorRate: 1})
	if code, _ := post(t, ts.URL+"/l/listener-2/api/v3/updates", map[string]any{"package_list": p1}); code != 503 {
		t.Fatalf("named call with error rate 1: %d, want 503", code)
	}
	post(t, ts.URL+"/admin/faults", Faults{})
	if code, _ := post(t, ts.URL+"/l/listener-2/api/v3/updates", map[string]any{"package_list": p1}); code != 200 {
		t.Fatalf("named call: %d", code)
	}
	resp, err := http.Get(ts.URL + "/l/listener-2/api/inventory/v1/hosts/" + host + "/system_profile")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("named inventory call: %d", resp.StatusCode)
	}
	for _, bad := range []string{"/l//api/v3/updates", "/l/a%2Fb/api/v3/updates", "/l/x/no/such/path"} {
		if code, _ := post(t, ts.URL+bad, map[string]any{"package_list": p0}); code != 404 {
			t.Fatalf("%s: %d, want 404", bad, code)
		}
	}
	got := srv.Evaluations()
	if len(got) != 2 || got[0].Caller != "listener-1" || got[0].Profile != Fingerprint(p0) ||
		got[1].Caller != "listener-2" || got[1].Profile != Fingerprint(p1) || got[1].At.Before(got[0].At) {
		t.Fatalf("evaluations %+v", got)
	}
	if Fingerprint(p0) == Fingerprint(p1) {
		t.Fatal("two hosts share a package list: the test cannot tell them apart")
	}
}

// The listener's VMaaS health check meets the mock's faults but is counted
// apart from the evaluations.
func TestProbesAreNotEvaluations(t *testing.T) {
	s, err := NewServer(NewDataset(1, DefaultSize()), ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	if code, _ := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": []string{clients.PingPackage}}); code != 200 {
		t.Fatalf("probe answered %d", code)
	}
	if st := s.Stats(); st.VMaaSCalls != 0 || st.VMaaSProbes != 1 {
		t.Fatalf("stats %+v: want 1 probe and no call", st)
	}
	if err := s.setFaults(Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": []string{clients.PingPackage}}); code != 503 {
		t.Fatalf("probe during a 503 fault answered %d", code)
	}
}

// A hung call is answered once the faults no longer hang its host, and Hung
// names its caller while it hangs: the zombie scenario holds one listener's
// call this way and lets it go while that listener is stopped.
func TestAHungCallIsAnsweredOnceTheHangIsLifted(t *testing.T) {
	ds := NewDataset(3, DefaultSize())
	shape := ProfileShape{Packages: 30, Repos: 5}
	srv, err := NewServer(ds, ServerOptions{Shape: shape, Faults: Faults{HangHosts: []string{host}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	answered := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(map[string]any{"package_list": ds.Profile(host, 1, shape).Packages})
		resp, err := http.Post(ts.URL+"/l/listener-7/api/v3/updates", "application/json", bytes.NewReader(b))
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Hung()["listener-7"] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the call never hung: %v", srv.Hung())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A change that still hangs the host keeps the call hanging.
	post(t, ts.URL+"/admin/faults", Faults{HangHosts: []string{host}, Latency: "fixed:0s"})
	select {
	case code := <-answered:
		t.Fatalf("answered %d while its host is still hung", code)
	case <-time.After(100 * time.Millisecond):
	}
	post(t, ts.URL+"/admin/faults", Faults{})
	select {
	case code := <-answered:
		if code != http.StatusOK {
			t.Fatalf("the released call got %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not answered once the hang was lifted")
	}
	if h := srv.Hung(); len(h) != 0 {
		t.Fatalf("hung after the release: %v", h)
	}
	if s := srv.Stats(); s.VMaaSHung != 1 {
		t.Fatalf("hung calls %d, want 1 (a call counts once however long it hangs)", s.VMaaSHung)
	}
	if ev := srv.Evaluations(); len(ev) != 1 || ev[0].Caller != "listener-7" {
		t.Fatalf("evaluations %+v; want the released call, for listener-7", ev)
	}
}
