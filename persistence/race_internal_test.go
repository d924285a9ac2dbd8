package persistence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// waitForLockWait waits until some backend of the database waits for a
// lock (any kind), or fails after 10 s.
func waitForLockWait(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no store waited for a lock within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two owners of a partition during a rebalance: the old one (A) found the
// host absent and asked VMaaS; meanwhile the new one (B) stored the same
// create and is deleting the host, its transaction still open, when A
// stores. A must not bring the host back once B commits.
func TestInsertRacingADeleteDoesNotResurrect(t *testing.T) {
	s, err := Open(context.Background(), pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const host = "8a3f1c2e-0000-4000-8000-000000000001"
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	u := SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at,
		Packages: []Package{{Name: "bash", EVRA: "0:5.1-1.x86_64"}}}
	e := Evaluation{Advisories: []AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: Installable}}}
	checkA, err := s.CheckUpload(ctx, u)
	if err != nil || !checkA.Apply {
		t.Fatalf("A's check: %+v %v", checkA, err)
	}
	if _, err := s.StoreEvaluatedSystem(ctx, u, e, checkA); err != nil { // B's create
		t.Fatal(err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()                                                                    //nolint:errcheck // a no-op after Commit
	if _, err := s.deleteSystem(ctx, tx, "org-1", host, at.Add(time.Minute)); err != nil { // B's delete, open
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.StoreEvaluatedSystem(ctx, u, e, checkA) // A's store, after its VMaaS call
		done <- err
	}()
	waitForLockWait(t, s)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadSystem(ctx, "org-1", host); !errors.Is(err, ErrNoSystem) {
		t.Fatalf("the host deleted while A stored it is stored again (%v)", err)
	}
}

// A database server that started since the ids were cached (a failover, a
// restore) may lack their rows: the cache empties; the same server keeps it.
func TestIDCacheEmptiesForAnotherServer(t *testing.T) {
	c := newIDCache(10)
	t1 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	c.seeServer(t1)
	c.packages.Add(Package{Name: "bash", EVRA: "1"}, 7)
	c.accounts.Add("org-1", 1)
	c.advisories.Add("RHSA-1", 3)
	c.seeServer(t1)
	if c.packages.Len() != 1 || c.accounts.Len() != 1 || c.advisories.Len() != 1 {
		t.Fatal("the same server emptied the cache")
	}
	c.seeServer(t1.Add(time.Hour))
	if c.packages.Len() != 0 || c.accounts.Len() != 0 || c.advisories.Len() != 0 {
		t.Fatal("another server kept the cached ids")
	}
}
