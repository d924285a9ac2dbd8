package persistence_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/persistence"
)

// notifiedKeys counts advisory_notified's foreign keys.
func notifiedKeys(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM pg_constraint WHERE conrelid = 'advisory_notified'::regclass AND contype = 'f'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Notifying an org writes no lock on the rows every writer shares: an
// advisory row locked by another transaction does not hold up the
// notification of that advisory (schema 6). At schema 5 the notification's
// foreign key waits for it, which shows the probe reaches the
// notification's insert.
func TestNotifyingTakesNoLockOnTheAdvisoryRows(t *testing.T) {
	s := openStore(t)
	db := s.DB()
	ctx := context.Background()
	storeWithEffects(t, s, upload(hostA, t0, "bash"), withEffects(evaluation("RHSA-1", "installable"), hostA, ""))
	for i, c := range []struct {
		version uint
		waits   bool
	}{{5, true}, {6, false}} {
		if err := persistence.MigrateTo(db, c.version); err != nil {
			t.Fatal(err)
		}
		// A transaction holding the advisory's row: a VMaaS sync, say.
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.ExecContext(ctx, `SELECT 1 FROM advisory WHERE name = 'RHSA-1' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		org := []string{"org-5", "org-6"}[i]
		host := []string{"8a3f1c2e-0000-4000-8000-000000000105", "8a3f1c2e-0000-4000-8000-000000000106"}[i]
		u := upload(host, t0, "bash")
		u.OrgID = org
		e := withEffects(evaluation("RHSA-1", "installable"), host, "")
		e.Effects.OrgID = org
		check, err := s.CheckUpload(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, werr := s.StoreEvaluatedSystem(wctx, u, e, check)
		cancel()
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
		switch {
		case c.waits && werr == nil:
			t.Fatalf("schema %d: the notification did not wait for the locked advisory row: the probe misses the foreign key", c.version)
		case !c.waits && werr != nil:
			t.Fatalf("schema %d: notifying an advisory whose row another transaction holds: %v", c.version, werr)
		}
		if c.waits {
			continue
		}
		var notified bool
		if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM advisory_notified n JOIN account a ON a.id = n.account_id WHERE a.org_id = $1)`, org).Scan(&notified); err != nil || !notified {
			t.Fatalf("schema %d: %s not notified (%v)", c.version, org, err)
		}
	}
}

// Migration 6 drops advisory_notified's two foreign keys, and its down
// migration puts them back.
func TestMigrationSixDropsTheNotifiedKeys(t *testing.T) {
	s := openStore(t)
	db := s.DB()
	for _, c := range []struct {
		version uint
		keys    int
	}{{6, 0}, {5, 2}, {6, 0}, {5, 2}} {
		if err := persistence.MigrateTo(db, c.version); err != nil {
			t.Fatal(err)
		}
		if n := notifiedKeys(t, db); n != c.keys {
			t.Fatalf("schema %d: advisory_notified has %d foreign keys, want %d", c.version, n, c.keys)
		}
	}
}

// While a transaction that read advisory stays open (an event's, or a
// reader's), migration 6 waits for the ACCESS EXCLUSIVE lock its keys'
// drop takes on account and advisory, and every event's lookup of them
// would queue behind it; it asks 100 ms at a time instead, and drops the
// keys once the reader is gone.
func TestMigrationSixDoesNotStallReadersOfSharedRows(t *testing.T) {
	s := openStore(t)
	db := s.DB()
	ctx := context.Background()
	if err := persistence.MigrateTo(db, 5); err != nil {
		t.Fatal(err)
	}
	reader, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.ExecContext(ctx, `SELECT count(*) FROM advisory`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- persistence.MigrateTo(db, 6) }() // a new release starting
	// The migration is under way once its statement shows in
	// pg_stat_activity (its first kilobyte: track_activity_query_size); from
	// then on it asks for the lock now and again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var running bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE query LIKE '%patchflow schema, version 6%' AND pid <> pg_backend_pid())`).Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running {
			break
		}
		if time.Now().After(deadline) {
			rows, _ := db.Query(`SELECT pid, state, wait_event_type, wait_event, left(query, 100) FROM pg_stat_activity`)
			for rows.Next() {
				var pid int
				var a, b, c, d sql.NullString
				rows.Scan(&pid, &a, &b, &c, &d)
				t.Log(pid, a.String, b.String, c.String, d.String)
			}
			t.Fatal("migration 6 did not start within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("started after %v", time.Since(deadline.Add(-10*time.Second)))
	// Several lookups over a second: each would queue behind a lock
	// request that waits for the reader.
	for i := range 5 {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		start := time.Now()
		var ids []int64
		err := db.QueryRowContext(wctx, `SELECT array_agg(id) FROM account WHERE org_id = ANY ($1)`, pq.Array([]string{"org-1"})).Scan(pq.Array(&ids))
		cancel()
		if err != nil {
			t.Fatalf("lookup %d during migration 6, with a reader open, waited %v and failed: %v", i, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := notifiedKeys(t, db); n != 2 {
		t.Fatalf("advisory_notified has %d foreign keys while the reader holds advisory, want the 2 it had", n)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatal(err)
	}
	if n := notifiedKeys(t, db); n != 0 {
		t.Fatalf("advisory_notified has %d foreign keys after migration 6, want 0", n)
	}
}
