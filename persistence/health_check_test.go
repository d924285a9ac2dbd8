package persistence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// healthCheckTimeout is the deadline the listener gives each check
// (consumer.healthCheckTimeout).
const healthCheckTimeout = 2 * time.Second

// healthCheck runs one check with the listener's deadline and says how
// long it took.
func healthCheck(s *persistence.Store) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), healthCheckTimeout)
	defer cancel()
	start := time.Now()
	err := s.Ping(ctx)
	return time.Since(start), err
}

// sqlState is err's SQLSTATE, "" when the server did not answer with one.
func sqlState(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code)
	}
	return ""
}

// openChecked opens a store on a fresh database, a connection straight to
// that database for the test's own statements, and the database's name.
func openChecked(t *testing.T) (*persistence.Store, *sql.DB, string) {
	t.Helper()
	dbURL := pgtest.URL(t)
	s, err := persistence.Open(context.Background(), dbURL, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	admin, err := sql.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return s, admin, strings.TrimPrefix(u.Path, "/")
}

// The check passes on a healthy database, and leaves what the records see
// as it found it: its canary account and system rows are rolled back. Its
// heartbeat is committed: the one row of health_check moves on each check.
func TestHealthCheckPassesAndLeavesNoRows(t *testing.T) {
	s, admin, _ := openChecked(t)
	var last time.Time
	for i := range 3 {
		if took, err := healthCheck(s); err != nil {
			t.Fatalf("check %d on a healthy database: %v after %s", i, err, took)
		}
		var beats int
		var at time.Time
		if err := admin.QueryRow(`SELECT count(*), max(checked_at) FROM health_check`).Scan(&beats, &at); err != nil {
			t.Fatalf("the heartbeat: %v", err)
		}
		if beats != 1 || !at.After(last) {
			t.Fatalf("check %d: health_check holds %d rows, last at %s (before: %s); want one row, moved on", i, beats, at, last)
		}
		last = at
	}
	var accounts, systems int
	if err := admin.QueryRow(`SELECT (SELECT count(*) FROM account), (SELECT count(*) FROM system)`).Scan(&accounts, &systems); err != nil {
		t.Fatal(err)
	}
	if accounts != 0 || systems != 0 {
		t.Fatalf("after the checks the database holds %d accounts and %d systems, want none", accounts, systems)
	}
}

// A migration's lock on system fails the check within its deadline, by the
// server's statement timeout: ACCESS EXCLUSIVE (ALTER TABLE, LOCK TABLE)
// stops the records' reads, SHARE (CREATE INDEX without CONCURRENTLY) only
// their writes. The check passes again as soon as the lock is released.
func TestHealthCheckFailsWhileAMigrationLocksSystem(t *testing.T) {
	for _, mode := range []string{"ACCESS EXCLUSIVE", "SHARE"} {
		t.Run(mode, func(t *testing.T) {
			s, admin, _ := openChecked(t)
			if took, err := healthCheck(s); err != nil {
				t.Fatalf("check before the lock: %v after %s", err, took)
			}
			tx, err := admin.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec(`LOCK TABLE system IN ` + mode + ` MODE`); err != nil { // mode is one of the two above
				t.Fatal(err)
			}
			took, err := healthCheck(s)
			t.Logf("check under the lock: %v after %s", err, took.Round(time.Millisecond))
			if err == nil || sqlState(err) != "57014" || took >= healthCheckTimeout {
				t.Fatalf("check with system locked in %s mode: %v after %s; want the server's statement timeout (57014) within %s",
					mode, err, took, healthCheckTimeout)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if took, err := healthCheck(s); err != nil {
				t.Fatalf("check right after the lock was released: %v after %s", err, took)
			}
		})
	}
}

// A read-only database (a standby promoted wrong, a failover to a replica;
// here default_transaction_read_only, its sessions ended as a failover
// ends them) fails the check with the server's refusal to write (25006).
// Made writable again, it passes.
func TestHealthCheckFailsOnAReadOnlyDatabase(t *testing.T) {
	s, admin, db := openChecked(t)
	if took, err := healthCheck(s); err != nil {
		t.Fatalf("check before: %v after %s", err, took)
	}
	failover := func(readOnly string) {
		t.Helper()
		// db is pgtest's generated name, not input.
		if _, err := admin.Exec(fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_read_only = %s`, pq.QuoteIdentifier(db), readOnly)); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
	}
	failover("on")
	took, err := healthCheck(s)
	t.Logf("check on the read-only database: %v after %s", err, took.Round(time.Millisecond))
	if sqlState(err) != "25006" {
		t.Fatalf("check on a read-only database: %v after %s; want the server's read_only_sql_transaction (25006)", err, took)
	}
	failover("off")
	if took, err := healthCheck(s); err != nil {
		t.Fatalf("check on the database writable again: %v after %s", err, took)
	}
}
