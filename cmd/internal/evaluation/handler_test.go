package evaluation_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/cmd/internal/evaluation"
	"github.com/patchflow/patchflow/cmd/internal/loadgen"
	"github.com/patchflow/patchflow/cmd/internal/platform"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
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
	return &fixture{ds: ds, mock: mock, store: store, handler: evaluation.New(store, vmaas, inv, messages.DefaultValidationOptions(), nil)}
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
	return f.handler.Handle(context.Background(), &messages.Record{Topic: "events", Key: []byte(spec.HostID), Value: body, Timestamp: timestamppb.New(spec.Timestamp)})
}

func (f *fixture) mustHandle(t *testing.T, spec platform.EventSpec) {
	t.Helper()
	if err := f.handle(t, spec); err != nil {
		t.Fatalf("handle %+v: %v", spec, err)
	}
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
// delete leave the rows of applying each event once, in order.
func TestIdempotentEffects(t *testing.T) {
	f := newFixture(t)
	created := platform.EventSpec{Type: "created", Timestamp: t0}
	updated := platform.EventSpec{Type: "updated", Timestamp: t0.Add(time.Minute), Revision: 2}
	f.mustHandle(t, created)
	f.mustHandle(t, updated)
	want := f.checkMatchesDataset(t, 2)

	f.mustHandle(t, updated) // the same event again
	f.mustHandle(t, created) // an older one after a newer one
	if got := f.checkMatchesDataset(t, 2); !reflect.DeepEqual(stable(got), stable(want)) {
		t.Fatal("replays changed the stored state")
	}

	f.mustHandle(t, platform.EventSpec{Type: "delete", Timestamp: t0.Add(2 * time.Minute)})
	f.mustHandle(t, updated) // a late update after the delete
	f.mustHandle(t, platform.EventSpec{Type: "updated", Timestamp: t0.Add(3 * time.Minute), Revision: 3})
	if st := f.state(t); st != nil {
		t.Fatalf("deleted host resurrected: %+v", st.SystemID)
	}
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

// Invalid events fail permanently and store nothing; VMaaS trouble fails
// transiently.
func TestErrorClasses(t *testing.T) {
	f := newFixture(t)
	err := f.handle(t, platform.EventSpec{Type: "created", Timestamp: t0, HostType: "edge"})
	var ve *messages.ValidationError
	if !errors.As(err, &ve) || ve.Reason != messages.ReasonExcludedHostType || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Fatalf("edge host: %v", err)
	}
	err = f.handle(t, platform.EventSpec{Type: "created", Timestamp: t0, Reporter: "someone-else"})
	if !errors.As(err, &ve) || ve.Reason != messages.ReasonReporterNotAllowed {
		t.Fatalf("foreign reporter: %v", err)
	}
	if f.state(t) != nil {
		t.Fatal("an invalid event stored a host")
	}
	if err := f.setFaults(platform.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	err = f.handle(t, platform.EventSpec{Type: "created", Timestamp: t0})
	if messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("VMaaS answering 503: %v (class %v), want transient", err, messages.ClassOf(err))
	}
	// the upload was stored; the evaluation is still due and happens on the retry
	if err := f.setFaults(platform.Faults{}); err != nil {
		t.Fatal(err)
	}
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: t0})
	f.checkMatchesDataset(t, 0)
}

// Every kind of bad message fails permanently with its own reason, through
// the real handler against PostgreSQL, and stores nothing.
func TestEveryValidationReasonIsPermanentAndStoresNothing(t *testing.T) {
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
		err = f.handler.Handle(context.Background(), &messages.Record{Key: []byte(id), Value: body})
		var ve *messages.ValidationError
		if !errors.As(err, &ve) || string(ve.Reason) != string(kind) || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
			t.Errorf("%s: got %v", kind, err)
		}
	}
	var n int
	if err := f.store.DB().QueryRow(`SELECT count(*) FROM system`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad messages stored %d systems (%v)", n, err)
	}
}
