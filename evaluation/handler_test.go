package evaluation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/evaluation"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

var (
	shape = platform.ProfileShape{Packages: 120, Repos: 30}
	t0    = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
)

type fixture struct {
	ds      *platform.Dataset
	mock    *platform.Server
	store   *persistence.Store
	handler *evaluation.Handler
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ds := platform.NewDataset(11, platform.DatasetSize{Packages: 800, Repos: 40, Advisories: 600})
	mock, err := platform.NewServer(ds, platform.ServerOptions{Shape: shape, BulkProfiles: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	store, err := persistence.Open(context.Background(), pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	fast := clients.VMaaSOptions{Timeout: 2 * time.Second, MaxAttempts: 2, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond}
	vmaas, err := clients.NewVMaaS(srv.URL, fast)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := clients.NewInventory(srv.URL, clients.InventoryOptions{Timeout: 2 * time.Second, MaxAttempts: 2, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vmaas.CloseIdleConnections(); inv.CloseIdleConnections() })
	return &fixture{ds: ds, mock: mock, store: store, handler: evaluation.New(store, vmaas, inv, inventory.DefaultValidationOptions(), nil)}
}

const host = "0f7f3c1e-9a52-4d6b-8e1a-2b3c4d5e6f70"

func (f *fixture) handle(t *testing.T, spec platform.EventSpec) error {
	t.Helper()
	if spec.OrgID == "" {
		spec.OrgID = "org-7"
	}
	if spec.HostID == "" {
		spec.HostID = host
	}
	body, err := f.ds.Event(spec, shape)
	if err != nil {
		t.Fatal(err)
	}
	return f.handler.Handle(context.Background(), &consumer.Record{Topic: "events", Key: []byte(spec.HostID), Value: body, Timestamp: spec.Timestamp})
}

func (f *fixture) mustHandle(t *testing.T, spec platform.EventSpec) {
	t.Helper()
	if err := f.handle(t, spec); err != nil {
		t.Fatalf("handle %+v: %v", spec, err)
	}
}

// mustSkip handles spec and requires the handler to skip it for want.
func (f *fixture) mustSkip(t *testing.T, spec platform.EventSpec, want messages.Reason) {
	t.Helper()
	requireSkip(t, fmt.Sprintf("%s at %v", spec.Type, spec.Timestamp), f.handle(t, spec), want)
}

// requireSkip asserts err is a skip for want: committed and counted, not a
// failure to retry or dead-letter.
func requireSkip(t *testing.T, what string, err error, want messages.Reason) {
	t.Helper()
	r, ok := messages.SkipReasonOf(err)
	if !ok || r != want {
		t.Fatalf("%s: got %v, want a skip for %q", what, err, want)
	}
	var ve *messages.ValidationError
	if errors.As(err, &ve) || messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Fatalf("%s: a skip that reads as broken: %v", what, err)
	}
}

// withoutPackages handles spec with its installed_packages emptied (or,
// with bare, its whole system_profile an empty object).
func (f *fixture) withoutPackages(t *testing.T, spec platform.EventSpec, bare bool) error {
	t.Helper()
	if spec.OrgID == "" {
		spec.OrgID = "org-7"
	}
	if spec.HostID == "" {
		spec.HostID = host
	}
	body, err := f.ds.Event(spec, shape)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	h := m["host"].(map[string]any)
	if bare {
		h["system_profile"] = map[string]any{}
	} else {
		h["system_profile"].(map[string]any)["installed_packages"] = []any{}
	}
	if body, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return f.handler.Handle(context.Background(), &consumer.Record{Topic: "events", Key: []byte(spec.HostID), Value: body})
}

// state returns what is stored for the host, or nil when nothing is.
func (f *fixture) state(t *testing.T) *persistence.SystemState {
	t.Helper()
	st, err := f.store.LoadSystem(context.Background(), "org-7", host)
	if errors.Is(err, persistence.ErrNoSystem) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkMatchesDataset compares the stored host with what the dataset says a
// host at this revision must look like.
func (f *fixture) checkMatchesDataset(t *testing.T, revision int) *persistence.SystemState {
	t.Helper()
	st := f.state(t)
	if st == nil {
		t.Fatal("host not stored")
	}
	p := f.ds.Profile(host, revision, shape)
	var pkgs []string
	for _, pk := range st.Packages {
		pkgs = append(pkgs, pk.Name+"-"+pk.EVRA)
	}
	if !reflect.DeepEqual(pkgs, p.Packages) {
		t.Fatalf("stored packages differ from revision %d of the profile (%d vs %d)", revision, len(pkgs), len(p.Packages))
	}
	want := f.ds.Evaluate(p.Packages, p.EnabledRepos())
	got := map[string]string{}
	for name, s := range st.Advisories {
		got[name] = string(s)
	}
	if len(want.Advisories) == 0 || !reflect.DeepEqual(got, want.Advisories) {
		t.Fatalf("stored %d advisories, the dataset says %d", len(got), len(want.Advisories))
	}
	if st.PackagesUpdatable != want.PackagesUpdatable {
		t.Fatalf("updatable %d, want %d", st.PackagesUpdatable, want.PackagesUpdatable)
	}
	return st
}

func TestCreatedEventStoresTheDatasetEvaluation(t *testing.T) {
	f := newFixture(t)
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: t0, Bulk: true})
	f.checkMatchesDataset(t, 0)
}

// Re-evaluation after packages were updated removes the advisories they fixed.
func TestUpdatedEventRemovesFixedAdvisories(t *testing.T) {
	f := newFixture(t)
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: t0})
	before := f.checkMatchesDataset(t, 0)
	f.mustHandle(t, platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Hour), Revision: 3})
	after := f.checkMatchesDataset(t, 3)
	fixed := 0
	for name := range before.Advisories {
		if _, still := after.Advisories[name]; !still {
			fixed++
		}
	}
	if fixed == 0 {
		t.Fatal("revision 3 fixed no advisory; the test proves nothing")
	}
}

// Invariant 7: the same event twice, older after newer, and update after
// delete leave the rows of applying each event once, in order. Invariant 8:
// each of those is skipped with its own reason (committed and counted,
// never dead-lettered), and none asks VMaaS again.
func TestIdempotentEffects(t *testing.T) {
	f := newFixture(t)
	created := platform.EventSpec{Type: "created", Timestamp: t0}
	updated := platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Minute), Revision: 2}
	f.mustHandle(t, created)
	f.mustHandle(t, updated)
	want := f.checkMatchesDataset(t, 2)
	calls := f.mock.Stats().VMaaSCalls

	f.mustSkip(t, updated, inventory.ReasonAlreadyApplied)   // the same event again
	f.mustSkip(t, created, inventory.ReasonOlderThanApplied) // an older one after a newer one
	if got := f.checkMatchesDataset(t, 2); !reflect.DeepEqual(stable(got), stable(want)) {
		t.Fatal("replays changed the stored state")
	}
	if n := f.mock.Stats().VMaaSCalls; n != calls {
		t.Fatalf("replays of evaluated events called VMaaS %d times", n-calls)
	}

	deleted := platform.EventSpec{Type: "delete", Timestamp: t0.Add(2 * time.Minute)}
	f.mustHandle(t, deleted)
	f.mustSkip(t, deleted, inventory.ReasonHostDeleted) // the delete again
	f.mustSkip(t, updated, inventory.ReasonHostDeleted) // a late update after the delete
	f.mustSkip(t, platform.EventSpec{Type: "updated", Timestamp: t0.Add(3 * time.Minute), Revision: 3}, inventory.ReasonHostDeleted)
	if st := f.state(t); st != nil {
		t.Fatalf("deleted host resurrected: %+v", st.SystemID)
	}
	// deleting a host never seen is a delete like any other
	f.mustHandle(t, platform.EventSpec{Type: "delete", HostID: platform.HostID(7, 7), Timestamp: t0})
}

// An upload whose evaluation fails stores nothing: the profile and its
// evaluation are one transaction, so the retry (or a redelivery) starts
// from what was stored before, and finishes as the first delivery would have.
func TestFailedEvaluationStoresNothing(t *testing.T) {
	f := newFixture(t)
	created := platform.EventSpec{Type: "created", Timestamp: t0}
	updated := platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Minute), Revision: 2}
	f.mustHandle(t, created)
	if err := f.setFaults(platform.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.handle(t, updated); messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("VMaaS answering 503: %v, want transient", err)
	}
	if st := f.checkMatchesDataset(t, 0); !st.LastEventTime.Equal(t0) {
		t.Fatalf("a failed evaluation stored its upload: last event %v, want %v", st.LastEventTime, t0)
	}
	if err := f.setFaults(platform.Faults{}); err != nil {
		t.Fatal(err)
	}
	f.mustSkip(t, created, inventory.ReasonAlreadyApplied)
	f.mustHandle(t, updated)
	f.checkMatchesDataset(t, 2)
	f.mustSkip(t, updated, inventory.ReasonAlreadyApplied)
}

// storeUnevaluated stores spec's profile without its evaluation, as the
// listener before schema version 2 could leave it (it stored the profile,
// then evaluated in a second transaction).
func (f *fixture) storeUnevaluated(t *testing.T, spec platform.EventSpec) {
	t.Helper()
	spec.OrgID, spec.HostID = "org-7", host
	body, err := f.ds.Event(spec, shape)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := inventory.DecodeInventoryEvent(body, inventory.DefaultValidationOptions())
	if err != nil {
		t.Fatal(err)
	}
	u, err := evaluation.NewUpload(ev, ev.Host.SystemProfile, spec.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.store.StoreSystem(context.Background(), u); err != nil || !res.Applied || !res.NeedsEvaluation {
		t.Fatalf("store %+v unevaluated: %+v %v", spec, res, err)
	}
}

// A profile stored but not evaluated is evaluated by the next event of the
// host that is not newer: its redelivery finishes as the first delivery
// would have; an older event evaluates the stored profile (not its own) and
// is then skipped.
func TestStoredButUnevaluatedUploadIsEvaluatedOnRedelivery(t *testing.T) {
	f := newFixture(t)
	created := platform.EventSpec{Type: "created", Timestamp: t0}
	updated := platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Minute), Revision: 2}
	f.mustHandle(t, created)
	f.storeUnevaluated(t, updated)
	if st := f.state(t); st.LastEvaluatedEventTime == nil || !st.LastEvaluatedEventTime.Equal(t0) {
		t.Fatalf("the stored profile reads as evaluated: %v", st.LastEvaluatedEventTime)
	}
	f.mustSkip(t, created, inventory.ReasonOlderThanApplied)
	f.checkMatchesDataset(t, 2) // the older event evaluated the stored revision 2

	// again, this time redelivering the event itself
	newest := platform.EventSpec{Type: "updated", Timestamp: t0.Add(2 * time.Minute), Revision: 3}
	f.storeUnevaluated(t, newest)
	f.mustHandle(t, newest) // finishes as the first delivery would have
	f.checkMatchesDataset(t, 3)
	f.mustSkip(t, newest, inventory.ReasonAlreadyApplied)
}

// A host without packages is stored, not sent to VMaaS, and loses the
// advisories of the packages it had; its record is skipped as "nothing to
// evaluate", and its redelivery as already applied.
func TestHostWithoutPackagesIsStoredNotEvaluated(t *testing.T) {
	f := newFixture(t)
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: t0})
	if before := f.checkMatchesDataset(t, 0); len(before.Advisories) == 0 {
		t.Fatal("revision 0 has no advisories; the test proves nothing")
	}
	calls := f.mock.Stats().VMaaSCalls
	empty := platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Minute), Revision: 1}
	requireSkip(t, "update without packages", f.withoutPackages(t, empty, false), inventory.ReasonNothingToEvaluate)
	st := f.state(t)
	switch {
	case st == nil:
		t.Fatal("a host without packages was not stored")
	case len(st.Packages) != 0 || len(st.Advisories) != 0 || st.Installable != 0 || st.Applicable != 0 || st.PackagesUpdatable != 0:
		t.Fatalf("host without packages keeps %d packages, %d advisories (%d installable, %d applicable, %d updatable)",
			len(st.Packages), len(st.Advisories), st.Installable, st.Applicable, st.PackagesUpdatable)
	case !st.LastEventTime.Equal(empty.Timestamp) || st.LastEvaluatedEventTime == nil || !st.LastEvaluatedEventTime.Equal(empty.Timestamp):
		t.Fatalf("host without packages: last event %v, last evaluated event %v; want both %v", st.LastEventTime, st.LastEvaluatedEventTime, empty.Timestamp)
	case len(st.Repos) == 0:
		t.Fatal("the rest of the profile was not stored")
	}
	if n := f.mock.Stats().VMaaSCalls; n != calls {
		t.Fatalf("a host without packages was sent to VMaaS (%d calls)", n-calls)
	}
	requireSkip(t, "the same event again", f.withoutPackages(t, empty, false), inventory.ReasonAlreadyApplied)

	// packages again: evaluated as usual
	f.mustHandle(t, platform.EventSpec{Type: "updated", Timestamp: t0.Add(2 * time.Minute), Revision: 2})
	f.checkMatchesDataset(t, 2)

	// a new host whose profile is an empty object
	other := platform.HostID(7, 1)
	requireSkip(t, "empty profile", f.withoutPackages(t, platform.EventSpec{Type: "created", HostID: other, Timestamp: t0}, true),
		inventory.ReasonNothingToEvaluate)
	if st, err := f.store.LoadSystem(context.Background(), "org-7", other); err != nil || len(st.Packages) != 0 {
		t.Fatalf("host with an empty profile: %+v, %v", st, err)
	}
}

// An event time finer than the database keeps still gets its evaluation
// stored, and its redelivery is recognised as the same event.
func TestSubMicrosecondEventTime(t *testing.T) {
	f := newFixture(t)
	at := t0.Add(123456789 * time.Nanosecond)
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: at})
	f.checkMatchesDataset(t, 0)
	f.mustSkip(t, platform.EventSpec{Type: "created", Timestamp: at}, inventory.ReasonAlreadyApplied)
}

// stable drops what legitimately differs between two equal states.
func stable(s *persistence.SystemState) *persistence.SystemState {
	c := *s
	c.SystemID = 0
	return &c
}

// An event with only the host id gets its profile from the inventory service.
func TestIDOnlyEventFetchesProfile(t *testing.T) {
	f := newFixture(t)
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: t0, IDOnly: true})
	f.checkMatchesDataset(t, 0)
	if f.handler.Stats().ProfilesFetched.Load() != 1 || f.mock.Stats().InventoryCalls != 1 {
		t.Fatal("the profile was not fetched from the inventory service")
	}
}

// Filtered events are skipped and store nothing; VMaaS trouble fails
// transiently.
func TestErrorClasses(t *testing.T) {
	f := newFixture(t)
	f.mustSkip(t, platform.EventSpec{Type: "created", Timestamp: t0, HostType: "edge"}, inventory.ReasonExcludedHostType)
	f.mustSkip(t, platform.EventSpec{Type: "created", Timestamp: t0, Reporter: "someone-else"}, inventory.ReasonReporterNotAllowed)
	if f.state(t) != nil {
		t.Fatal("a filtered event stored a host")
	}
	if err := f.setFaults(platform.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	err := f.handle(t, platform.EventSpec{Type: "created", Timestamp: t0})
	if messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("VMaaS answering 503: %v (class %v), want transient", err, messages.ClassOf(err))
	}
	// the upload was stored; the evaluation is still due and happens on the retry
	if err := f.setFaults(platform.Faults{}); err != nil {
		t.Fatal(err)
	}
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: t0})
	f.checkMatchesDataset(t, 0)

	// a filtered event for a stored host leaves it as it is
	want := f.checkMatchesDataset(t, 0)
	f.mustSkip(t, platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Minute), Revision: 2, HostType: "edge"}, inventory.ReasonExcludedHostType)
	if got := f.checkMatchesDataset(t, 0); !reflect.DeepEqual(got, want) {
		t.Fatal("a filtered update changed the stored host")
	}
}

// Through the real handler against PostgreSQL, the messages loadgen sends:
// every bad kind fails permanently with its own reason and stores nothing;
// every skip kind is skipped with the reason of its name, the filtered
// ones storing nothing and the one without packages storing its host.
func TestEveryLoadgenKind(t *testing.T) {
	f := newFixture(t)
	o := loadgen.DefaultOptions()
	o.Shape, o.Bulk, o.TooLargeBytes = shape, false, 2_000_000
	for i, kind := range loadgen.BadKinds {
		id := platform.HostID(99, i)
		item := loadgen.Item{Key: id, Bad: kind, Event: platform.EventSpec{Type: "created", HostID: id, OrgID: "org-7", Timestamp: t0}}
		body, err := loadgen.Render(f.ds, o, item)
		if err != nil {
			t.Fatal(err)
		}
		err = f.handler.Handle(context.Background(), &consumer.Record{Key: []byte(id), Value: body})
		var ve *messages.ValidationError
		if !errors.As(err, &ve) || string(ve.Reason) != string(kind) || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
			t.Errorf("%s: got %v", kind, err)
		}
	}
	var n int
	if err := f.store.DB().QueryRow(`SELECT count(*) FROM system`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad messages stored %d systems (%v)", n, err)
	}

	var stored []string
	for i, kind := range loadgen.SkipKinds {
		id := platform.HostID(98, i)
		item := loadgen.Item{Key: id, Skip: kind, Event: platform.EventSpec{Type: "created", HostID: id, OrgID: "org-7", Timestamp: t0}}
		body, err := loadgen.Render(f.ds, o, item)
		if err != nil {
			t.Fatal(err)
		}
		err = f.handler.Handle(context.Background(), &consumer.Record{Key: []byte(id), Value: body})
		requireSkip(t, string(kind), err, messages.Reason(kind))
		if kind == loadgen.SkipNoPackages {
			stored = append(stored, id)
		}
	}
	var got []string
	rows, err := f.store.DB().Query(`SELECT inventory_id::text FROM system WHERE packages_installed = 0 AND cardinality(package_ids) = 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if err := f.store.DB().QueryRow(`SELECT count(*) FROM system`).Scan(&n); err != nil || n != len(stored) || !reflect.DeepEqual(got, stored) {
		t.Fatalf("stored %d systems, %v without packages; want only %v (%v)", n, got, stored, err)
	}
}
