package evaluation_test

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/proving/platform"
)

// Finding, a known limit (docs/architecture.md, "Known limits"): a deleted
// host is remembered only by its deleted_system row, and any delete forgets
// the rows older than DELETED_SYSTEM_TTL. An upload stamped before the
// delete and redelivered after its row was forgotten (a redelivery more
// than the TTL after the delete, once another delete ran) brings the host
// back, with its pre-delete profile. Until another delete forgets the row
// the host stays deleted however old the row is: the check reads the row,
// not its age. This test holds that behaviour; it fails once a delete is
// remembered for longer than a redelivery can come (then drop the limit).
func TestOldUploadRedeliveredAfterItsDeleteIsForgottenResurrectsTheHost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	upload := platform.EventSpec{Type: "created", Timestamp: t0}
	f.mustHandle(t, upload)
	f.mustHandle(t, platform.EventSpec{Type: "delete", Timestamp: t0.Add(time.Minute)})
	f.mustSkip(t, upload, inventory.ReasonHostDeleted) // remembered: not brought back

	// The delete happened longer than the TTL ago (the fixture's store has
	// the default TTL).
	ttl := persistence.DefaultPoolSettings().DeletedTTL
	if _, err := f.store.DB().ExecContext(ctx, `UPDATE deleted_system SET deleted_at = deleted_at - make_interval(secs => $1) WHERE inventory_id = $2`,
		(ttl + time.Minute).Seconds(), host); err != nil {
		t.Fatal(err)
	}
	f.mustSkip(t, upload, inventory.ReasonHostDeleted) // an old row still counts until it is forgotten

	// Another host's delete forgets every row older than the TTL, this
	// host's among them: the store's only way of forgetting.
	f.mustHandle(t, platform.EventSpec{Type: "delete", HostID: platform.HostID(7, 9), Timestamp: t0.Add(2 * time.Minute)})
	var remembered bool
	if err := f.store.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $1)`, host).Scan(&remembered); err != nil {
		t.Fatal(err)
	}
	if remembered {
		t.Fatal("the delete older than the TTL is still remembered: the setup did not forget it")
	}

	// The redelivered upload from before the delete is applied: the host is back.
	f.mustHandle(t, upload)
	st := f.state(t)
	if st == nil {
		t.Fatal("the host stayed deleted: the limit in docs/architecture.md is closed, update it and this test")
	}
	if !st.LastEventTime.Equal(t0) {
		t.Fatalf("the host came back at %v, want the redelivered upload's %v", st.LastEventTime, t0)
	}
	f.checkMatchesDataset(t, 0)
}
