package checker_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
	"github.com/patchflow/patchflow/proving/checker"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

var shape = platform.ProfileShape{Packages: 30, Repos: 8}

// store writes the state the dataset says host must have at revision.
func store(t *testing.T, s *persistence.Store, ds *platform.Dataset, host string, revision int, at time.Time) {
	t.Helper()
	storeAt(t, s, ds, host, revision, 0, at)
}

// storeAt writes the state the dataset says host must have at revision
// after changes small changes.
func storeAt(t *testing.T, s *persistence.Store, ds *platform.Dataset, host string, revision, changes int, at time.Time) {
	t.Helper()
	p := ds.ProfileAt(host, revision, changes, shape)
	res := storeUnevaluatedAt(t, s, ds, host, revision, changes, at)
	var e persistence.Evaluation
	for name, status := range ds.Evaluate(p.Packages, p.EnabledRepos()).Advisories {
		e.Advisories = append(e.Advisories, persistence.AdvisoryResult{Name: name, Type: "security", Status: persistence.AdvisoryStatus(status)})
	}
	if _, err := s.StoreEvaluation(context.Background(), res, e); err != nil {
		t.Fatal(err)
	}
}

// storeUnevaluated writes host's profile at revision, as an upload whose
// evaluation never came back leaves it.
func storeUnevaluated(t *testing.T, s *persistence.Store, ds *platform.Dataset, host string, revision int, at time.Time) persistence.UploadResult {
	t.Helper()
	return storeUnevaluatedAt(t, s, ds, host, revision, 0, at)
}

func storeUnevaluatedAt(t *testing.T, s *persistence.Store, ds *platform.Dataset, host string, revision, changes int, at time.Time) persistence.UploadResult {
	t.Helper()
	p := ds.ProfileAt(host, revision, changes, shape)
	u := persistence.SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at, Repos: p.EnabledRepos()}
	for _, nevra := range p.Packages {
		i := strings.Index(nevra, ":")
		dash := strings.LastIndex(nevra[:i], "-")
		u.Packages = append(u.Packages, persistence.Package{Name: nevra[:dash], EVRA: nevra[dash+1:]})
	}
	res, err := s.StoreSystem(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The checker passes a correct database and catches each kind of wrong row.
func TestCheckerFindsWrongRows(t *testing.T) {
	ctx := context.Background()
	s, err := persistence.Open(ctx, pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds := platform.NewDataset(5, platform.DatasetSize{Packages: 300, Repos: 20, Advisories: 200})
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hosts := []string{platform.HostID(5, 0), platform.HostID(5, 1), platform.HostID(5, 2)}
	expected := map[string]*loadgen.HostState{}
	for i, h := range hosts {
		store(t, s, ds, h, i, at)
		expected[h] = &loadgen.HostState{HostID: h, OrgID: "org-1", Revision: i, EventTime: at}
	}
	gone := platform.HostID(5, 3)
	expected[gone] = &loadgen.HostState{HostID: gone, OrgID: "org-1", Deleted: true}
	filtered := platform.HostID(5, 4)
	expected[filtered] = &loadgen.HostState{HostID: filtered, OrgID: "org-1", Filtered: true}
	empty := platform.HostID(5, 5)
	res, err := s.StoreSystem(ctx, persistence.SystemUpload{OrgID: "org-1", InventoryID: empty, EventTime: at, LastUpload: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreEvaluation(ctx, res, persistence.Evaluation{}); err != nil {
		t.Fatal(err)
	}
	expected[empty] = &loadgen.HostState{HostID: empty, OrgID: "org-1", EventTime: at, NoPackages: true}
	hostage := platform.HostID(5, 6)
	expected[hostage] = &loadgen.HostState{HostID: hostage, OrgID: "org-1", Revision: 2, EventTime: at, Unevaluated: true}

	rep, err := checker.Check(ctx, s.DB(), ds, shape, expected, 2)
	if err != nil || !rep.OK() || rep.Present != 4 || rep.Empty != 1 || rep.Unevaluated != 1 || rep.Deleted != 1 || rep.Filtered != 1 {
		t.Fatalf("correct database: %v %v", rep, err)
	}

	// a lost package row, a lost advisory, a wrong revision, a resurrected
	// host, a filtered host stored, packages on a host that has none, an
	// profile stored for a host none can evaluate
	if _, err := s.DB().Exec(`UPDATE system SET package_ids = package_ids[2:] WHERE inventory_id = $1`, hosts[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`UPDATE system SET advisory_ids = advisory_ids[2:], advisory_first_reported = advisory_first_reported[2:]
		WHERE inventory_id = $1`, hosts[1]); err != nil {
		t.Fatal(err)
	}
	expected[hosts[2]].Revision = 7
	store(t, s, ds, gone, 0, at)
	store(t, s, ds, filtered, 0, at)
	if _, err := s.DB().Exec(`UPDATE system SET package_ids = ARRAY[(SELECT min(id) FROM package)] WHERE inventory_id = $1`, empty); err != nil {
		t.Fatal(err)
	}
	storeUnevaluated(t, s, ds, hostage, 2, at)
	rep, err = checker.Check(ctx, s.DB(), ds, shape, expected, 2)
	if err != nil || rep.Wrong != 7 || len(rep.Examples) != 7 {
		t.Fatalf("seven wrong hosts, checker says %v (%v): %v", rep, err, rep.Examples)
	}
	// each host is wrong for its own reason (an unqualified ctid in the
	// deletes above once emptied every host, which hid the advisory check)
	for host, why := range map[string]string{hosts[0]: "29 packages stored", hosts[1]: "advisories stored", hosts[2]: "revision 7",
		gone: "deleted host still stored", filtered: "filtered host stored", empty: "1 packages stored", hostage: "no evaluation of it can succeed"} {
		if !slices.ContainsFunc(rep.Examples, func(e string) bool { return strings.HasPrefix(e, host+": ") && strings.Contains(e, why) }) {
			t.Errorf("no example says %s: %s...: %v", host, why, rep.Examples)
		}
	}
}

// A host that re-checked in with a few packages changed is checked against
// its profile after those changes: right after them, wrong one change short
// or one too many.
func TestCheckerFollowsSmallChanges(t *testing.T) {
	ctx := context.Background()
	s, err := persistence.Open(ctx, pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds := platform.NewDataset(6, platform.DatasetSize{Packages: 300, Repos: 20, Advisories: 200})
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	changed, short := platform.HostID(6, 0), platform.HostID(6, 1)
	storeAt(t, s, ds, changed, 1, 2, at)
	storeAt(t, s, ds, short, 1, 2, at)
	expected := map[string]*loadgen.HostState{
		changed: {HostID: changed, OrgID: "org-1", Revision: 1, Changes: 2, EventTime: at},
		short:   {HostID: short, OrgID: "org-1", Revision: 1, Changes: 3, EventTime: at},
	}
	rep, err := checker.Check(ctx, s.DB(), ds, shape, expected, 2)
	if err != nil || rep.Present != 1 || rep.Wrong != 1 || len(rep.Examples) != 1 || !strings.HasPrefix(rep.Examples[0], short+": ") ||
		!strings.Contains(rep.Examples[0], "revision 1 with 3 small changes") {
		t.Fatalf("one host as changed, one a change short: %v %v %v", rep, err, rep.Examples)
	}
	expected[short].Changes = 2
	expected[changed].Changes = 1
	rep, err = checker.Check(ctx, s.DB(), ds, shape, expected, 2)
	if err != nil || rep.Present != 1 || rep.Wrong != 1 || !strings.HasPrefix(rep.Examples[0], changed+": ") {
		t.Fatalf("one host a change too many: %v %v %v", rep, err, rep.Examples)
	}
}
