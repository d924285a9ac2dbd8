package persistence_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

func openStore(t *testing.T) *persistence.Store {
	t.Helper()
	s, err := persistence.Open(context.Background(), pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func upload(host string, at time.Time, pkgs ...string) persistence.SystemUpload {
	u := persistence.SystemUpload{
		OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at, DisplayName: "host " + host,
		Reporter: "puptoo", Arch: "x86_64", Releasever: "8", Repos: []string{"baseos", "appstream"},
		Modules: []persistence.Module{{Name: "nodejs", Stream: "18"}},
	}
	for _, p := range pkgs {
		u.Packages = append(u.Packages, persistence.Package{Name: p, EVRA: "0:1.0-1.el8.x86_64"})
	}
	return u
}

const hostA = "8a3f1c2e-0000-4000-8000-000000000001"

func load(t *testing.T, s *persistence.Store, host string) *persistence.SystemState {
	t.Helper()
	st, err := s.LoadSystem(context.Background(), "org-1", host)
	if err != nil {
		t.Fatalf("load %s: %v", host, err)
	}
	return st
}

// Applying the same upload twice leaves the rows of applying it once.
func TestSameUploadTwice(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	u := upload(hostA, t0, "bash", "kernel", "openssl")
	first, err := s.StoreSystem(ctx, u)
	if err != nil || !first.Applied || !first.NeedsEvaluation {
		t.Fatalf("first upload: %+v, %v", first, err)
	}
	before := load(t, s, hostA)
	second, err := s.StoreSystem(ctx, upload(hostA, t0, "openssl", "kernel", "bash"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Applied || second.Skipped != persistence.SkippedSameEvent || second.SystemID != first.SystemID {
		t.Fatalf("second upload: %+v", second)
	}
	if !second.NeedsEvaluation {
		t.Fatal("a redelivery of a stored but never evaluated upload must still ask for its evaluation")
	}
	if after := load(t, s, hostA); !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if len(before.Packages) != 3 || before.Packages[0].Name != "bash" {
		t.Fatalf("packages %+v", before.Packages)
	}
}

// An event time finer than the database keeps (a producer sending
// nanoseconds) still orders and matches: the evaluation of the upload is
// stored, and the same upload again is the same event, whichever way the
// time rounds.
func TestSubMicrosecondEventTime(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for i, at := range []time.Time{t0.Add(123456789 * time.Nanosecond), t0.Add(time.Second + 123456289*time.Nanosecond)} {
		res, err := s.StoreSystem(ctx, upload(hostA, at, "bash"))
		if err != nil || !res.Applied {
			t.Fatalf("upload %d: %+v, %v", i, res, err)
		}
		stored, err := s.StoreEvaluation(ctx, res, persistence.Evaluation{PackagesUpdatable: i + 1})
		if err != nil || !stored {
			t.Fatalf("upload %d: evaluation of the stored event not stored (%v)", i, err)
		}
		again, err := s.StoreSystem(ctx, upload(hostA, at, "bash"))
		if err != nil || again.Applied || again.Skipped != persistence.SkippedSameEvent || again.NeedsEvaluation {
			t.Fatalf("upload %d again: %+v, %v; want the same event, evaluated", i, again, err)
		}
	}
}

// A profile without packages, repositories or modules is stored (the host
// exists, with nothing to evaluate), and replaces the packages a host had.
func TestUploadWithoutPackages(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	if _, err := s.StoreSystem(ctx, upload(hostA, t0, "bash", "kernel")); err != nil {
		t.Fatal(err)
	}
	bare := persistence.SystemUpload{OrgID: "org-1", InventoryID: hostA, EventTime: t0.Add(time.Minute), LastUpload: t0.Add(time.Minute)}
	res, err := s.StoreSystem(ctx, bare)
	if err != nil || !res.Applied || !res.NeedsEvaluation {
		t.Fatalf("upload without packages: %+v, %v", res, err)
	}
	if st := load(t, s, hostA); len(st.Packages) != 0 || len(st.Repos) != 0 || len(st.Modules) != 0 {
		t.Fatalf("stored %+v, want no packages, repositories or modules", st)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT packages_installed FROM system WHERE inventory_id = $1`, hostA).Scan(&n); err != nil || n != 0 {
		t.Fatalf("packages_installed = %d (%v)", n, err)
	}
}

// Replaying an older upload after a newer one leaves the newer state.
func TestOlderUploadAfterNewer(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	if _, err := s.StoreSystem(ctx, upload(hostA, t0.Add(time.Minute), "bash", "kernel")); err != nil {
		t.Fatal(err)
	}
	newer := load(t, s, hostA)
	res, err := s.StoreSystem(ctx, upload(hostA, t0, "bash", "kernel", "old-package"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied || res.Skipped != persistence.SkippedOlder || !res.EventTime.Equal(t0.Add(time.Minute)) {
		t.Fatalf("older upload: %+v, want skipped as older, at the newer event's time", res)
	}
	if got := load(t, s, hostA); !reflect.DeepEqual(got, newer) {
		t.Fatalf("older upload changed the state: %+v", got.Packages)
	}
	// and in order, both apply
	res, err = s.StoreSystem(ctx, upload(hostA, t0.Add(2*time.Minute), "zsh"))
	if err != nil || !res.Applied {
		t.Fatalf("newer upload: %+v %v", res, err)
	}
	if got := load(t, s, hostA); len(got.Packages) != 1 || got.Packages[0].Name != "zsh" {
		t.Fatalf("packages after the newest upload: %+v", got.Packages)
	}
}

// An upload for a deleted host does not resurrect it.
func TestUploadAfterDelete(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	if _, err := s.StoreSystem(ctx, upload(hostA, t0, "bash")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // deleting twice is fine, and the second delete says it changed nothing
		already, err := s.DeleteSystem(ctx, "org-1", hostA, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if already != (i == 1) {
			t.Fatalf("delete %d: alreadyDeleted = %v", i+1, already)
		}
	}
	for _, at := range []time.Time{t0, t0.Add(2 * time.Minute)} {
		res, err := s.StoreSystem(ctx, upload(hostA, at, "bash"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Applied || res.Skipped != persistence.SkippedDeleted {
			t.Fatalf("upload at %v after delete: %+v", at, res)
		}
	}
	if _, err := s.LoadSystem(ctx, "org-1", hostA); err != persistence.ErrNoSystem {
		t.Fatalf("deleted host still stored: %v", err)
	}
	if del, err := s.IsDeleted(ctx, hostA); err != nil || !del {
		t.Fatalf("IsDeleted = %v, %v", del, err)
	}
}

// A host deleted longer than the TTL ago is forgotten; deleting it again is
// a new delete, remembered for the TTL again (not swept away by the same
// transaction's clean-up).
func TestDeleteAfterTTLIsRememberedAgain(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	if already, err := s.DeleteSystem(ctx, "org-1", hostA, t0); err != nil || already {
		t.Fatalf("first delete: %v, %v", already, err)
	}
	ttl := persistence.DefaultPoolSettings().DeletedTTL
	if _, err := s.DB().Exec(`UPDATE deleted_system SET deleted_at = now() - make_interval(secs => $1)`, (ttl + time.Hour).Seconds()); err != nil {
		t.Fatal(err)
	}
	already, err := s.DeleteSystem(ctx, "org-1", hostA, t0.Add(time.Minute))
	if err != nil || already {
		t.Fatalf("delete after the TTL: alreadyDeleted %v, %v; want a new delete", already, err)
	}
	if del, err := s.IsDeleted(ctx, hostA); err != nil || !del {
		t.Fatalf("host deleted again is not remembered: %v, %v", del, err)
	}
}

// hotUpdates returns how many updates of the system table were HOT
// (heap-only: no index entry written), waiting until the statistics show
// at least want of them or 10 s pass: backends report statistics when idle,
// within a second.
func hotUpdates(t *testing.T, s *persistence.Store, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int64
		if err := s.DB().QueryRow(`SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'system'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An unchanged re-check-in leaves the package and advisory arrays as they
// are, so the update writes no index entry (their GIN entries included):
// it is HOT. A changed profile is written, and reads back as stored.
func TestUnchangedRecheckInIsHeapOnly(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	e := evaluation("RHSA-1", "installable", "RHBA-2", "applicable")
	check := func(u persistence.SystemUpload) persistence.UploadCheck {
		c, err := s.CheckUpload(ctx, u)
		if err != nil || !c.Apply {
			t.Fatalf("check %+v: %v", c, err)
		}
		return c
	}
	// As many packages as a real host has: arrays this long are stored
	// compressed or out of line, where an equal value written again is a
	// new value to PostgreSQL, and the update not HOT.
	names := make([]string, 400)
	for i := range names {
		names[i] = fmt.Sprintf("package-%03d", i)
	}
	u := upload(hostA, t0, names...)
	if _, err := s.StoreEvaluatedSystem(ctx, u, e, check(u)); err != nil {
		t.Fatal(err)
	}
	before := hotUpdates(t, s, 0)
	for i := 1; i <= 3; i++ { // the same packages, in another order; the same advisories
		u := upload(hostA, t0.Add(time.Duration(i)*time.Minute), names...)
		slices.Reverse(u.Packages)
		if res, err := s.StoreEvaluatedSystem(ctx, u, e, check(u)); err != nil || !res.Applied {
			t.Fatalf("%+v %v", res, err)
		}
	}
	if got := hotUpdates(t, s, before+3) - before; got != 3 {
		t.Fatalf("%d of 3 unchanged re-check-ins were HOT updates", got)
	}
	u = upload(hostA, t0.Add(5*time.Minute), "kernel")
	if res, err := s.StoreEvaluatedSystem(ctx, u, evaluation("RHSA-1", "applicable"), check(u)); err != nil || !res.Applied {
		t.Fatalf("%+v %v", res, err)
	}
	got := load(t, s, hostA)
	if len(got.Packages) != 1 || got.Packages[0].Name != "kernel" {
		t.Fatalf("removed package still stored: %+v", got.Packages)
	}
	if !reflect.DeepEqual(got.Advisories, map[string]persistence.AdvisoryStatus{"RHSA-1": persistence.Applicable}) {
		t.Fatalf("advisories %v after the change", got.Advisories)
	}
}

func evaluation(pairs ...string) persistence.Evaluation {
	var e persistence.Evaluation
	for i := 0; i+1 < len(pairs); i += 2 {
		e.Advisories = append(e.Advisories, persistence.AdvisoryResult{Name: pairs[i], Type: "security", Status: persistence.AdvisoryStatus(pairs[i+1])})
	}
	return e
}

// Re-evaluation adds new advisories, removes fixed ones, updates statuses.
func TestEvaluationReplacesAdvisories(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	res, err := s.StoreSystem(ctx, upload(hostA, t0, "bash"))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := s.StoreEvaluation(ctx, res, evaluation("RHSA-1", "installable", "RHSA-2", "applicable", "RHSA-3", "installable"))
	if err != nil || !ok {
		t.Fatalf("store evaluation: %v %v", ok, err)
	}
	st := load(t, s, hostA)
	if len(st.Advisories) != 3 || st.Installable != 2 || st.Applicable != 1 || st.LastEvaluatedEventTime == nil {
		t.Fatalf("state %+v", st)
	}
	res, err = s.StoreSystem(ctx, upload(hostA, t0.Add(time.Minute), "bash", "zsh"))
	if err != nil {
		t.Fatal(err)
	}
	ok, err = s.StoreEvaluation(ctx, res, evaluation("RHSA-2", "installable", "RHSA-4", "applicable"))
	if err != nil || !ok {
		t.Fatalf("re-evaluation: %v %v", ok, err)
	}
	st = load(t, s, hostA)
	want := map[string]persistence.AdvisoryStatus{"RHSA-2": persistence.Installable, "RHSA-4": persistence.Applicable}
	if !reflect.DeepEqual(st.Advisories, want) || st.Installable != 1 || st.Applicable != 1 {
		t.Fatalf("after re-evaluation %+v, want %v", st, want)
	}
}

// An evaluation of an older upload is not stored over a newer one.
func TestStaleEvaluationIgnored(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	first, _ := s.StoreSystem(ctx, upload(hostA, t0, "bash"))
	if _, err := s.StoreSystem(ctx, upload(hostA, t0.Add(time.Minute), "zsh")); err != nil {
		t.Fatal(err)
	}
	ok, err := s.StoreEvaluation(ctx, first, evaluation("RHSA-1", "installable"))
	if err != nil || ok {
		t.Fatalf("stale evaluation stored=%v err=%v", ok, err)
	}
	if st := load(t, s, hostA); len(st.Advisories) != 0 || st.LastEvaluatedEventTime != nil {
		t.Fatalf("stale evaluation left %+v", st)
	}
}

// Many hosts of one account, sharing packages and advisories written in
// random orders, evaluated at once: no deadlock, no error.
func TestConcurrentEvaluationsDoNotDeadlock(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	const hosts, rounds = 40, 3
	pkgPool := make([]string, 60)
	for i := range pkgPool {
		pkgPool[i] = fmt.Sprintf("pkg-%02d", i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, hosts*rounds)
	var lastMu sync.Mutex
	last := map[string]persistence.SystemUpload{}
	lastEval := map[string]persistence.Evaluation{}
	for h := 0; h < hosts; h++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(h), 1))
			host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", h)
			for r := 0; r < rounds; r++ {
				pkgs := append([]string(nil), pkgPool...)
				rng.Shuffle(len(pkgs), func(i, j int) { pkgs[i], pkgs[j] = pkgs[j], pkgs[i] })
				u := upload(host, t0.Add(time.Duration(r)*time.Minute), pkgs[:20+rng.IntN(40)]...)
				for i := range u.Packages { // new package versions appear concurrently
					u.Packages[i].EVRA = fmt.Sprintf("0:1.%d-%d.el8.x86_64", r, rng.IntN(3))
				}
				res, err := s.StoreSystem(ctx, u)
				if err != nil {
					errs <- err
					return
				}
				lastMu.Lock()
				last[host] = u
				lastMu.Unlock()
				var pairs []string
				for _, a := range rng.Perm(50)[:25] {
					pairs = append(pairs, fmt.Sprintf("RHSA-2026:%04d", a), "installable")
				}
				if _, err := s.StoreEvaluation(ctx, res, evaluation(pairs...)); err != nil {
					errs <- err
					return
				}
				lastMu.Lock()
				lastEval[host] = evaluation(pairs...)
				lastMu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write failed (a deadlock shows as 40P01): %v", err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM system`).Scan(&n); err != nil || n != hosts {
		t.Fatalf("%d systems stored, want %d (%v)", n, hosts, err)
	}
	// Every host holds exactly its last upload's packages: a package another
	// transaction inserted at the same moment must not be lost.
	for host, u := range last {
		st := load(t, s, host)
		want := map[persistence.Package]bool{}
		for _, p := range u.Packages {
			want[p] = true
		}
		got := map[persistence.Package]bool{}
		for _, p := range st.Packages {
			got[p] = true
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("host %s: %d packages stored, its last upload had %d", host, len(got), len(want))
		}
		if len(st.Advisories) != len(lastEval[host].Advisories) {
			t.Fatalf("host %s: %d advisories stored, its last evaluation had %d", host, len(st.Advisories), len(lastEval[host].Advisories))
		}
	}
}

func TestErrorClassification(t *testing.T) {
	cases := map[string]messages.ErrorClass{
		"40P01": messages.ErrorClass_ERROR_CLASS_TRANSIENT, // deadlock
		"40001": messages.ErrorClass_ERROR_CLASS_TRANSIENT, // serialization failure
		"57P01": messages.ErrorClass_ERROR_CLASS_TRANSIENT, // admin shutdown
		"08006": messages.ErrorClass_ERROR_CLASS_TRANSIENT, // connection failure
		"23505": messages.ErrorClass_ERROR_CLASS_UNKNOWN,   // unique violation: a bug, not an outage
	}
	for code, want := range cases {
		if got := messages.ClassOf(persistence.Classify(&pq.Error{Code: pqerror.Code(code)})); got != want {
			t.Errorf("code %s: class %v, want %v", code, got, want)
		}
	}
	// a server that is not there
	_, err := persistence.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", persistence.DefaultPoolSettings())
	if err == nil {
		t.Fatal("Open succeeded against a closed port")
	}
}

// Open gives back every connection it used: the whole pool is left for the work.
func TestOpenLeavesThePoolFree(t *testing.T) {
	s := openStore(t)
	if st := s.DB().Stats(); st.InUse != 0 {
		t.Fatalf("%d connections of the pool in use after Open, want 0", st.InUse)
	}
}

// Two listeners (two stores, each with its own id cache) store evaluated
// uploads at once: hosts of their own sharing new packages and advisories,
// and the same new hosts from both, as two owners of a partition during a
// rebalance would. Every write succeeds or fails transiently (retried
// here, as the pipeline would); in the end each host holds exactly the
// packages and advisories of its newest upload.
func TestConcurrentStoresOfEvaluatedSystems(t *testing.T) {
	url := pgtest.URL(t)
	stores := make([]*persistence.Store, 2)
	for i := range stores {
		s, err := persistence.Open(context.Background(), url, persistence.DefaultPoolSettings())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	ctx := context.Background()
	const hosts, rounds = 30, 3
	type write struct {
		u persistence.SystemUpload
		e persistence.Evaluation
	}
	// Round r of host h is the same upload whichever store writes it.
	plan := func(h, r int) write {
		rng := rand.New(rand.NewPCG(uint64(h), uint64(r)))
		host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", h)
		var names []string
		for _, i := range rng.Perm(60)[:20+rng.IntN(40)] {
			names = append(names, fmt.Sprintf("pkg-%02d", i))
		}
		u := upload(host, t0.Add(time.Duration(r)*time.Minute), names...)
		for i := range u.Packages { // new package versions appear concurrently
			u.Packages[i].EVRA = fmt.Sprintf("0:1.%d-%d.el8.x86_64", r, rng.IntN(3))
		}
		var pairs []string
		for _, a := range rng.Perm(50)[:25] {
			pairs = append(pairs, fmt.Sprintf("RHSA-2026:%04d", a), []string{"installable", "applicable"}[a%2])
		}
		return write{u, evaluation(pairs...)}
	}
	var transient atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*hosts)
	for si, s := range stores {
		for h := range hosts {
			if h%3 == si { // a third of the hosts each store alone; the last third both
				continue
			}
			wg.Go(func() {
				for r := range rounds {
					w := plan(h, r)
					for attempt := 0; ; attempt++ {
						c, err := s.CheckUpload(ctx, w.u)
						if err == nil && !c.Apply {
							break // the other store was first
						}
						if err == nil {
							_, err = s.StoreEvaluatedSystem(ctx, w.u, w.e, c)
						}
						if err == nil {
							break
						}
						if messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT || attempt == 5 {
							errs <- fmt.Errorf("host %d round %d: %w", h, r, err)
							return
						}
						transient.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write failed: %v", err)
	}
	t.Logf("%d transient failures retried", transient.Load())
	for h := range hosts {
		w := plan(h, rounds-1)
		st := load(t, stores[h%2], w.u.InventoryID)
		want := slices.Clone(w.u.Packages)
		slices.SortFunc(want, func(a, b persistence.Package) int { return strings.Compare(a.Name+" "+a.EVRA, b.Name+" "+b.EVRA) })
		if !slices.Equal(st.Packages, want) {
			t.Fatalf("host %d: packages %v, its newest upload has %v", h, st.Packages, want)
		}
		wantAdv := map[string]persistence.AdvisoryStatus{}
		for _, a := range w.e.Advisories {
			wantAdv[a.Name] = a.Status
		}
		if !reflect.DeepEqual(st.Advisories, wantAdv) || st.LastEvaluatedEventTime == nil || !st.LastEvaluatedEventTime.Equal(w.u.EventTime) {
			t.Fatalf("host %d: advisories %v evaluated at %v; want %v at %v", h, st.Advisories, st.LastEvaluatedEventTime, wantAdv, w.u.EventTime)
		}
	}
}

// Storing an upload leaves the caller's upload as it was: its packages are
// sorted and de-duplicated on a copy (the handler sends the same upload's
// packages to VMaaS).
func TestStoreLeavesTheCallersUploadAlone(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	u := upload(hostA, t0, "zsh", "bash", "zsh", "attr")
	before := slices.Clone(u.Packages)
	c, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreEvaluatedSystem(ctx, u, persistence.Evaluation{}, c); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.Packages, before) {
		t.Fatalf("the caller's packages became %v, were %v", u.Packages, before)
	}
	if got := load(t, s, hostA).Packages; len(got) != 3 {
		t.Fatalf("stored %v, want the three distinct packages", got)
	}
}
