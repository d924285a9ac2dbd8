package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence"
)

// host returns the inventory id of host i.
func host(i int) string { return fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", i) }

// storeEvaluated stores an upload of org's host i with pkgs and its
// evaluation e, through the listener's own write.
func storeEvaluated(t *testing.T, s *persistence.Store, org string, i int, pkgs []persistence.Package, e persistence.Evaluation) int64 {
	t.Helper()
	u := upload(host(i), t0)
	u.OrgID, u.Packages, u.DisplayName = org, pkgs, fmt.Sprintf("host %d", i)
	ctx := context.Background()
	check, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.StoreEvaluatedSystem(ctx, u, e, check)
	if err != nil || !res.Applied {
		t.Fatalf("store host %d: %+v, %v", i, res, err)
	}
	return res.SystemID
}

func pkg(name, evra string) persistence.Package { return persistence.Package{Name: name, EVRA: evra} }

// A system's advisories (with type, severity, status and first report) and
// packages, sorted; a system not stored, or of another org, is ErrNoSystem;
// a system without any is an empty list.
func TestReadsOfASystem(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	storeEvaluated(t, s, "org-1", 1, []persistence.Package{pkg("openssl", "1:3.0.7-1.el9.x86_64"), pkg("bash", "0:5.1-2.el9.x86_64"),
		pkg("kernel", "0:5.14-2.el9.x86_64"), pkg("kernel", "0:5.14-1.el9.x86_64")},
		persistence.Evaluation{Advisories: []persistence.AdvisoryResult{
			{Name: "RHSA-2026:0002", Type: "security", Status: persistence.Installable},
			{Name: "RHBA-2026:0001", Type: "bugfix", Status: persistence.Applicable},
		}})
	storeEvaluated(t, s, "org-1", 2, nil, persistence.Evaluation{})
	if _, err := s.DB().Exec(`UPDATE advisory SET severity = 'Important' WHERE name = 'RHSA-2026:0002'`); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Minute)

	advs, err := s.SystemAdvisories(ctx, "org-1", host(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(advs) != 2 {
		t.Fatalf("advisories %+v", advs)
	}
	for _, a := range advs {
		if a.FirstReported.Before(before) || a.FirstReported.After(after) || a.FirstReported.Location() != time.UTC {
			t.Errorf("%s first reported %v, want about now, in UTC", a.Name, a.FirstReported)
		}
	}
	for i := range advs {
		advs[i].FirstReported = time.Time{}
	}
	want := []persistence.SystemAdvisory{
		{Name: "RHBA-2026:0001", Type: "bugfix", Status: persistence.Applicable},
		{Name: "RHSA-2026:0002", Type: "security", Severity: "Important", Status: persistence.Installable},
	}
	if !reflect.DeepEqual(advs, want) {
		t.Errorf("advisories\n%+v, want\n%+v", advs, want)
	}
	pkgs, err := s.SystemPackages(ctx, "org-1", host(1))
	if err != nil {
		t.Fatal(err)
	}
	wantPkgs := []persistence.Package{pkg("bash", "0:5.1-2.el9.x86_64"), pkg("kernel", "0:5.14-1.el9.x86_64"),
		pkg("kernel", "0:5.14-2.el9.x86_64"), pkg("openssl", "1:3.0.7-1.el9.x86_64")}
	if !reflect.DeepEqual(pkgs, wantPkgs) {
		t.Errorf("packages\n%+v, want\n%+v", pkgs, wantPkgs)
	}

	if advs, err := s.SystemAdvisories(ctx, "org-1", host(2)); err != nil || len(advs) != 0 {
		t.Errorf("advisories of a system affected by nothing: %+v, %v", advs, err)
	}
	if pkgs, err := s.SystemPackages(ctx, "org-1", host(2)); err != nil || len(pkgs) != 0 {
		t.Errorf("packages of a system without any: %+v, %v", pkgs, err)
	}
	for _, q := range [][2]string{{"org-1", host(3)}, {"org-2", host(1)}} {
		if _, err := s.SystemAdvisories(ctx, q[0], q[1]); !errors.Is(err, persistence.ErrNoSystem) {
			t.Errorf("advisories of %v: %v, want ErrNoSystem", q, err)
		}
		if _, err := s.SystemPackages(ctx, q[0], q[1]); !errors.Is(err, persistence.ErrNoSystem) {
			t.Errorf("packages of %v: %v, want ErrNoSystem", q, err)
		}
	}
}

// walk reads every page of a listing, checking that each but the last is
// full and that the cursors go up.
func walk[T any](t *testing.T, page func(after int64) ([]T, int64, error), id func(T) int64) (all []T, sizes []int) {
	t.Helper()
	var after int64
	for range 100 {
		p, next, err := page(after)
		if err != nil {
			t.Fatal(err)
		}
		all, sizes = append(all, p...), append(sizes, len(p))
		if next == 0 {
			return all, sizes
		}
		if len(p) != persistence.PageSize || next != id(p[len(p)-1]) || next <= after {
			t.Fatalf("page after %d: %d systems, next %d", after, len(p), next)
		}
		after = next
	}
	t.Fatal("more than 100 pages")
	return nil, nil
}

// The systems an advisory affects and those with a package name, paged
// 100 at a time by system id, within one org: every system once, in id
// order, with its status or its builds of the name.
func TestSystemListingsArePaged(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	type affected struct {
		status persistence.AdvisoryStatus
		evras  []string
	}
	want := map[int64]affected{} // org-1's systems with RHSA-1 and openssl
	var withAdvisory, withOpenSSL []int64
	for i := range 250 {
		pkgs := []persistence.Package{pkg("bash", "0:5.1-2.el9.x86_64")}
		var e persistence.Evaluation
		var w affected
		if i%5 != 4 { // one in five has neither
			status := persistence.Installable
			if i%2 == 1 {
				status = persistence.Applicable
			}
			e.Advisories = []persistence.AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: status},
				{Name: fmt.Sprintf("RHBA-%d", i%7), Type: "bugfix", Status: persistence.Installable}}
			w.evras = []string{fmt.Sprintf("1:3.0.%d-1.el9.x86_64", i%3)}
			if i%10 == 3 { // two builds of the name
				w.evras = append(w.evras, "1:3.0.9-1.el9.x86_64")
			}
			for _, evra := range w.evras {
				pkgs = append(pkgs, pkg("openssl", evra))
			}
			w.status = status
		}
		id := storeEvaluated(t, s, "org-1", i, pkgs, e)
		if w.status != "" {
			want[id] = w
			withAdvisory, withOpenSSL = append(withAdvisory, id), append(withOpenSSL, id)
		}
		// Another org's system with both, between them.
		storeEvaluated(t, s, "org-2", 1000+i, []persistence.Package{pkg("openssl", "1:3.0.0-1.el9.x86_64")},
			persistence.Evaluation{Advisories: []persistence.AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: persistence.Installable}}})
	}
	slices.Sort(withAdvisory)
	slices.Sort(withOpenSSL)

	affectedPages, sizes := walk(t, func(after int64) ([]persistence.AffectedSystem, int64, error) {
		return s.AdvisorySystems(ctx, "org-1", "RHSA-1", after)
	}, func(a persistence.AffectedSystem) int64 { return a.ID })
	if !reflect.DeepEqual(sizes, []int{100, 100}) {
		t.Errorf("pages of the systems RHSA-1 affects: %v, want [100 100]", sizes)
	}
	var ids []int64
	for _, a := range affectedPages {
		ids = append(ids, a.ID)
		if w := want[a.ID]; a.Status != w.status || a.InventoryID == "" || a.DisplayName == "" {
			t.Errorf("system %d: %+v, want status %s", a.ID, a, w.status)
		}
	}
	if !reflect.DeepEqual(ids, withAdvisory) {
		t.Errorf("systems RHSA-1 affects\n%v, want\n%v", ids, withAdvisory)
	}

	installed, sizes := walk(t, func(after int64) ([]persistence.InstalledSystem, int64, error) {
		return s.PackageSystems(ctx, "org-1", "openssl", after)
	}, func(i persistence.InstalledSystem) int64 { return i.ID })
	if !reflect.DeepEqual(sizes, []int{100, 100}) {
		t.Errorf("pages of the systems with openssl: %v, want [100 100]", sizes)
	}
	ids = nil
	for _, i := range installed {
		ids = append(ids, i.ID)
		if w := want[i.ID]; !reflect.DeepEqual(i.EVRAs, w.evras) || i.InventoryID == "" || i.DisplayName == "" {
			t.Errorf("system %d: %+v, want builds %v", i.ID, i, w.evras)
		}
	}
	if !reflect.DeepEqual(ids, withOpenSSL) {
		t.Errorf("systems with openssl\n%v, want\n%v", ids, withOpenSSL)
	}

	// A page after any system id starts at the next one.
	mid := withAdvisory[137]
	p, _, err := s.AdvisorySystems(ctx, "org-1", "RHSA-1", mid)
	if err != nil || len(p) != len(withAdvisory)-138 || p[0].ID != withAdvisory[138] {
		t.Errorf("page after %d: %d systems from %v (%v), want %d from %d", mid, len(p), p, err, len(withAdvisory)-138, withAdvisory[138])
	}
	// Unknown names affect nothing, and an org has none of another's.
	for _, q := range [][2]string{{"org-1", "RHSA-404"}, {"org-3", "RHSA-1"}} {
		if p, next, err := s.AdvisorySystems(ctx, q[0], q[1], 0); err != nil || len(p) != 0 || next != 0 {
			t.Errorf("systems %v affects: %v, %d, %v", q, p, next, err)
		}
	}
	for _, q := range [][2]string{{"org-1", "no-such-package"}, {"org-3", "openssl"}, {"org-1", "openss"}} {
		if p, next, err := s.PackageSystems(ctx, q[0], q[1], 0); err != nil || len(p) != 0 || next != 0 {
			t.Errorf("systems with %v: %v, %d, %v", q, p, next, err)
		}
	}
}

// Keyset pages: a system deleted after its page was read moves no other
// system off the next page (OFFSET would skip one).
func TestPagesSurviveADelete(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	var ids []int64
	for i := range 150 {
		ids = append(ids, storeEvaluated(t, s, "org-1", i, []persistence.Package{pkg("bash", "0:5.1-2.el9.x86_64")},
			persistence.Evaluation{Advisories: []persistence.AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: persistence.Installable}}}))
	}
	slices.Sort(ids)
	first, next, err := s.AdvisorySystems(ctx, "org-1", "RHSA-1", 0)
	if err != nil || len(first) != 100 || next != ids[99] {
		t.Fatalf("first page: %d systems, next %d, %v", len(first), next, err)
	}
	pkgFirst, pkgNext, err := s.PackageSystems(ctx, "org-1", "bash", 0)
	if err != nil || len(pkgFirst) != 100 || pkgNext != ids[99] {
		t.Fatalf("first page of bash: %d systems, next %d, %v", len(pkgFirst), pkgNext, err)
	}
	if _, err := s.DeleteSystem(ctx, "org-1", first[10].InventoryID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	second, next, err := s.AdvisorySystems(ctx, "org-1", "RHSA-1", next)
	if err != nil || len(second) != 50 || second[0].ID != ids[100] || next != 0 {
		t.Errorf("second page after a delete: %d systems from %d, next %d, %v; want 50 from %d", len(second), second[0].ID, next, err, ids[100])
	}
	pkgSecond, pkgNext, err := s.PackageSystems(ctx, "org-1", "bash", pkgNext)
	if err != nil || len(pkgSecond) != 50 || pkgSecond[0].ID != ids[100] || pkgNext != 0 {
		t.Errorf("second page of bash after a delete: %d systems, next %d, %v; want 50 from %d", len(pkgSecond), pkgNext, err, ids[100])
	}
}
