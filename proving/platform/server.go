package platform

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/proving/downstream"
)

// Faults are what the mock does wrong, changeable at run time through
// POST /admin/faults (the e2e suite turns 503s and slowness on and off).
type Faults struct {
	ErrorRate float64 `json:"error_rate"` // share of VMaaS calls answered 503
	Latency   string  `json:"latency"`    // VMaaS latency distribution, see ParseLatency
	// Capacity is how many VMaaS calls are served at once (0: any number):
	// each holds one of Capacity slots for its latency, and the others
	// queue for a slot, first come first served, the wait adding to their
	// latency, as in front of a VMaaS with this many workers. A change
	// applies to the calls that queue after it: lowering it lets the calls
	// being served finish, raising it serves queued calls at once.
	Capacity int `json:"capacity"`
	// HangHosts are host ids whose evaluations get no answer: a VMaaS call
	// whose package list is one of these hosts' profiles (any revision up
	// to HangRevisions) waits until the client gives up, or until the
	// faults change to no longer hang it, and is then served as any other.
	// The rest are served normally: a dependency that fails for some
	// records only.
	HangHosts []string `json:"hang_hosts,omitempty"`
}

// HangRevisions bounds the profile revisions HangHosts covers: far more
// updates than any host gets in a test stream.
const HangRevisions = 200

// ServerOptions configure the mock.
type ServerOptions struct {
	Faults           Faults
	InventoryLatency Latency
	Shape            ProfileShape // shape of profiles served by the inventory endpoint
	BulkProfiles     bool         // serve whole (about 100 KB) profiles
}

// Server serves VMaaS POST /api/v3/updates and the inventory
// GET /api/inventory/v1/hosts/{id}/system_profile from a Dataset.
//
// A client may name itself with a path prefix: its base URL
// http://mock/l/<caller> reaches the same endpoints, and the mock records
// every VMaaS evaluation it answers for a named caller (Evaluations). The
// e2e suite gives each listener process its own name, to tell which process
// evaluated what. Unnamed calls are served the same and not recorded.
type Server struct {
	ds      *Dataset
	opts    ServerOptions
	mu      sync.RWMutex
	faults  Faults
	latency Latency
	hang    map[string]bool // package-list fingerprints of HangHosts' profiles
	// changed is closed, and replaced, whenever the faults change: a hung
	// call waits on it to look at the hang again.
	changed chan struct{}
	// hungNow counts the calls hanging now, by caller ("" unnamed).
	hungNow map[string]int
	// capacity gates the VMaaS latency sleeps; its limit is
	// Faults.Capacity.
	capacity *downstream.Capacity
	mux      *http.ServeMux

	vmaasCalls, vmaas503, vmaasHung, inventoryCalls, probes atomic.Int64

	evalMu      sync.Mutex
	evaluations []Evaluation
}

// CallerPrefix starts the path of a named caller: /l/<caller>/api/...
const CallerPrefix = "/l/"

// Evaluation is one VMaaS call the mock answered for a named caller.
type Evaluation struct {
	Caller string
	// Profile is the Fingerprint of the call's package list: which host
	// profile was evaluated.
	Profile string
	At      time.Time // when the answer was sent
}

type callerKey struct{}

// validCaller accepts the names a path segment carries unescaped.
var validCaller = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// NewServer returns the mock for ds.
func NewServer(ds *Dataset, opts ServerOptions) (*Server, error) {
	s := &Server{ds: ds, opts: opts, mux: http.NewServeMux(), capacity: downstream.NewCapacity(0),
		changed: make(chan struct{}), hungNow: map[string]int{}}
	if err := s.setFaults(opts.Faults); err != nil {
		return nil, err
	}
	s.mux.HandleFunc("POST /api/v3/updates", s.updates)
	s.mux.HandleFunc("GET /api/inventory/v1/hosts/{id}/system_profile", s.systemProfile)
	s.mux.HandleFunc("POST /admin/faults", s.postFaults)
	s.mux.HandleFunc("GET /admin/stats", s.stats)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return s, nil
}

// ServeHTTP serves r, first taking a caller's name off its path (see
// CallerPrefix).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, named := strings.CutPrefix(r.URL.Path, CallerPrefix)
	if !named {
		s.mux.ServeHTTP(w, r)
		return
	}
	caller, _, _ := strings.Cut(rest, "/")
	if !validCaller.MatchString(caller) {
		http.Error(w, "caller name must be letters, digits, '.', '_' or '-'", http.StatusNotFound)
		return
	}
	prefix := CallerPrefix + caller
	r2 := r.Clone(context.WithValue(r.Context(), callerKey{}, caller))
	r2.URL.Path = strings.TrimPrefix(r.URL.Path, prefix)
	r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, prefix)
	if r2.URL.Path == "" {
		r2.URL.Path = "/"
	}
	s.mux.ServeHTTP(w, r2)
}

// Evaluations returns the VMaaS evaluations answered for named callers so
// far, in the order they were answered.
func (s *Server) Evaluations() []Evaluation {
	s.evalMu.Lock()
	defer s.evalMu.Unlock()
	return slices.Clone(s.evaluations)
}

func (s *Server) setFaults(f Faults) error {
	if f.Capacity < 0 {
		return fmt.Errorf("capacity %d: must not be negative (0: any number)", f.Capacity)
	}
	if f.Latency == "" {
		f.Latency = "fixed:0s"
	}
	l, err := ParseLatency(f.Latency)
	if err != nil {
		return err
	}
	var hang map[string]bool
	if len(f.HangHosts) > 0 {
		hang = map[string]bool{}
		for _, id := range f.HangHosts {
			for rev := 0; rev <= HangRevisions; rev++ {
				hang[Fingerprint(s.ds.Profile(id, rev, s.opts.Shape).Packages)] = true
			}
		}
	}
	s.mu.Lock()
	s.faults, s.latency, s.hang = f, l, hang
	s.capacity.SetLimit(f.Capacity)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// Hung returns the callers with a VMaaS call hanging now (HangHosts), and
// how many each.
func (s *Server) Hung() map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.hungNow)
}

// hangWhile holds a call for profile while the faults hang it; false when
// the client gave up first.
func (s *Server) hangWhile(r *http.Request, profile string) bool {
	caller, _ := r.Context().Value(callerKey{}).(string)
	counted := false
	defer func() {
		if counted {
			s.mu.Lock()
			if s.hungNow[caller]--; s.hungNow[caller] == 0 {
				delete(s.hungNow, caller)
			}
			s.mu.Unlock()
		}
	}()
	for {
		s.mu.Lock()
		hung, changed := s.hang[profile], s.changed
		if hung && !counted {
			s.hungNow[caller]++
			counted = true
			s.vmaasHung.Add(1)
		}
		s.mu.Unlock()
		if !hung {
			return true
		}
		select {
		case <-r.Context().Done():
			return false
		case <-changed:
		}
	}
}

// Fingerprint identifies a package list whatever its order and however its
// NEVRAs are spelled (an epoch of 0 written or not): the profile a VMaaS
// call evaluates.
func Fingerprint(packages []string) string {
	canon := make([]string, len(packages))
	for i, p := range packages {
		canon[i] = p
		if n, err := inventory.ParseNEVRA(p); err == nil {
			canon[i] = n.String()
		}
	}
	slices.Sort(canon)
	sum := sha256.Sum256([]byte(strings.Join(canon, "\n")))
	return string(sum[:])
}

type updatesRequest struct {
	PackageList    []string `json:"package_list"`
	RepositoryList []string `json:"repository_list"`
	ModulesList    []struct {
		Name   string `json:"module_name"`
		Stream string `json:"module_stream"`
	} `json:"modules_list"`
	Releasever string `json:"releasever"`
	Basearch   string `json:"basearch"`
}

type update struct {
	Package     string `json:"package"`
	PackageName string `json:"package_name"`
	EVRA        string `json:"evra"`
	Erratum     string `json:"erratum,omitempty"`
	Repository  string `json:"repository"`
	Basearch    string `json:"basearch"`
	Releasever  string `json:"releasever"`
}

type packageUpdates struct {
	AvailableUpdates []update `json:"available_updates"`
}

type updatesResponse struct {
	UpdateList     map[string]packageUpdates `json:"update_list"`
	RepositoryList []string                  `json:"repository_list,omitempty"`
	Releasever     string                    `json:"releasever"`
	Basearch       string                    `json:"basearch"`
	LastChange     string                    `json:"last_change"`
}

func (s *Server) updates(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	errorRate, latency := s.faults.ErrorRate, s.latency
	s.mu.RUnlock()
	var req updatesRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		s.vmaasCalls.Add(1)
		http.Error(w, "malformed request: "+err.Error(), http.StatusBadRequest)
		return
	}
	// The listener's health check (clients.VMaaS.Ping) meets the same
	// faults as the evaluations but is not one: counted apart, so the
	// calls still count evaluations (and repeated ones).
	if len(req.PackageList) == 1 && req.PackageList[0] == clients.PingPackage {
		s.probes.Add(1)
		if errorRate > 0 && rand.Float64() < errorRate {
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		if !sleep(r, latency.Sample()) {
			return
		}
		writeJSON(w, updatesResponse{UpdateList: map[string]packageUpdates{req.PackageList[0]: {AvailableUpdates: []update{}}}, LastChange: "2026-11-01T00:00:00Z"})
		return
	}
	s.vmaasCalls.Add(1)
	profile := Fingerprint(req.PackageList)
	if !s.hangWhile(r, profile) {
		return // the client gave up
	}
	if s.capacity.Acquire(r.Context()) != nil {
		return // the client gave up while queued
	}
	served := sleep(r, latency.Sample())
	s.capacity.Release()
	if !served {
		return
	}
	if errorRate > 0 && rand.Float64() < errorRate {
		s.vmaas503.Add(1)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if len(req.PackageList) == 0 {
		http.Error(w, "package_list is required", http.StatusBadRequest)
		return
	}
	var repos map[string]bool
	if len(req.RepositoryList) > 0 {
		repos = map[string]bool{}
		for _, id := range req.RepositoryList {
			repos[id] = true
		}
	}
	resp := updatesResponse{UpdateList: make(map[string]packageUpdates, len(req.PackageList)),
		RepositoryList: req.RepositoryList, Releasever: req.Releasever, Basearch: req.Basearch, LastChange: "2026-11-01T00:00:00Z"}
	for _, p := range req.PackageList {
		ups := []update{}
		for _, u := range s.ds.UpdatesFor(p, repos) {
			ups = append(ups, update{Package: u.Package, PackageName: u.PackageName, EVRA: u.EVRA, Erratum: u.Erratum,
				Repository: u.Repository, Basearch: Arch, Releasever: Releasever})
		}
		resp.UpdateList[p] = packageUpdates{AvailableUpdates: ups}
	}
	// Recorded before the answer is written: a caller that has its answer
	// must find its evaluation already counted.
	if caller, ok := r.Context().Value(callerKey{}).(string); ok {
		s.evalMu.Lock()
		s.evaluations = append(s.evaluations, Evaluation{Caller: caller, Profile: profile, At: time.Now()})
		s.evalMu.Unlock()
	}
	writeJSON(w, resp)
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (s *Server) systemProfile(w http.ResponseWriter, r *http.Request) {
	s.inventoryCalls.Add(1)
	id := r.PathValue("id")
	if !sleep(r, s.opts.InventoryLatency.Sample()) {
		return
	}
	if !uuidRE.MatchString(id) {
		http.Error(w, "host not found", http.StatusNotFound)
		return
	}
	doc := SystemProfile(s.ds.Profile(id, 0, s.opts.Shape), s.opts.BulkProfiles)
	writeJSON(w, map[string]any{"count": 1, "page": 1, "per_page": 50, "total": 1,
		"results": []map[string]any{{"id": id, "system_profile": doc}}})
}

func (s *Server) postFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.setFaults(f); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, f)
}

// Stats counts the calls served.
type Stats struct {
	VMaaSCalls     int64 `json:"vmaas_calls"`
	VMaaS503       int64 `json:"vmaas_503"`
	VMaaSHung      int64 `json:"vmaas_hung"` // calls that hung (HangHosts), whether answered once the hang was lifted or not
	InventoryCalls int64 `json:"inventory_calls"`
	// VMaaSProbes are the listeners' VMaaS health checks, in no other count.
	VMaaSProbes int64 `json:"vmaas_probes"`
	// VMaaSServing and VMaaSQueued are the VMaaS calls holding a slot of
	// Faults.Capacity (waiting their latency; with no capacity, every call
	// that does) and waiting for one, now.
	// Hung calls are in neither.
	VMaaSServing int `json:"vmaas_serving"`
	VMaaSQueued  int `json:"vmaas_queued"`
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	return Stats{VMaaSCalls: s.vmaasCalls.Load(), VMaaS503: s.vmaas503.Load(), VMaaSHung: s.vmaasHung.Load(), InventoryCalls: s.inventoryCalls.Load(), VMaaSProbes: s.probes.Load(),
		VMaaSServing: s.capacity.Serving(), VMaaSQueued: s.capacity.Queued()}
}

func (s *Server) stats(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Stats()) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sleep waits d unless the client goes away first.
func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// Listen serves s on a free port of 127.0.0.1 and returns its base URL and
// a function that stops serving.
func Listen(s *Server) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}
