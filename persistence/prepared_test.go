package persistence_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// openOneConnection opens a store on url with a pool of one connection,
// its statements prepared or not, closed when t ends.
func openOneConnection(t *testing.T, url string, prepared bool) *persistence.Store {
	t.Helper()
	pool := persistence.DefaultPoolSettings()
	pool.MaxOpen, pool.MaxIdle, pool.Prepared = 1, 1, prepared
	s, err := persistence.Open(context.Background(), url, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openAdmin opens a pool of its own on url, for a test's reads and faults
// beside the store's, closed when t ends.
func openAdmin(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// resetStatementStats empties pg_stat_statements (creating it in the
// test's database first: .ci/postgres preloads it).
func resetStatementStats(t *testing.T, db *sql.DB) {
	t.Helper()
	if _, err := db.Exec(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		t.Fatalf("pg_stat_statements (.ci/postgres preloads it): %v", err)
	}
	if _, err := db.Exec(`SELECT pg_stat_statements_reset()`); err != nil {
		t.Fatal(err)
	}
}

// An event's statements are planned once per connection, not once per
// call: PostgreSQL's planning was about a quarter of its CPU per
// re-check-in. With the statements prepared, PostgreSQL plans each a few
// times (custom plans until it settles on a generic one) however many times
// it runs; sent as text, each call is planned. The unprepared mode must
// store the same.
func TestEventStatementsArePlannedOncePerConnection(t *testing.T) {
	for _, prepared := range []bool{true, false} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			ctx := context.Background()
			url := pgtest.URL(t)
			s := openOneConnection(t, url, prepared)
			db := openAdmin(t, url)
			resetStatementStats(t, db)
			const hosts = 40
			for i := range hosts {
				host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", i)
				for rev := range 2 { // an insert, then an update
					u := upload(host, t0.Add(time.Duration(rev)*time.Minute), "bash", "kernel")
					check, err := s.CheckUpload(ctx, u)
					if err != nil {
						t.Fatal(err)
					}
					if res, err := s.StoreEvaluatedSystem(ctx, u, evaluation("RHSA-1", "installable"), check); err != nil || !res.Applied {
						t.Fatalf("host %d revision %d: %+v, %v", i, rev, res, err)
					}
				}
				if st := load(t, s, host); !st.LastEventTime.Equal(t0.Add(time.Minute)) || len(st.Advisories) != 1 {
					t.Fatalf("host %d stored %+v", i, st)
				}
			}
			rows, err := db.QueryContext(ctx, `
				SELECT query, calls, plans FROM pg_stat_statements
				WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
					AND (query LIKE '%FROM deleted_system WHERE inventory_id = $2)%' OR query LIKE '%INSERT INTO system %'
						OR query LIKE '%UPDATE system SET display_name%' OR query LIKE 'SELECT pg_advisory_xact_lock%')`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			seen := 0
			for rows.Next() {
				var q string
				var calls, plans int64
				if err := rows.Scan(&q, &calls, &plans); err != nil {
					t.Fatal(err)
				}
				seen++
				q = strings.Join(strings.Fields(q), " ")
				q = q[:min(len(q), 40)]
				t.Logf("%s…: %d calls, %d plans", q, calls, plans)
				if calls < hosts {
					t.Errorf("%s…: %d calls, want at least %d", q, calls, hosts)
				}
				if prepared && plans > 10 {
					t.Errorf("%s…: planned %d times in %d calls on one connection; prepared, it is planned a few times at most", q, plans, calls)
				}
				if !prepared && plans < calls {
					t.Errorf("%s…: planned %d times in %d calls; unprepared, every call is planned", q, plans, calls)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if seen != 4 {
				t.Fatalf("found %d of the 4 statements (check, host lock, insert, update) in pg_stat_statements", seen)
			}
		})
	}
}

// A migration that changes the type of a column the prepared statements
// return leaves them working: their columns are cast, so the server does
// not refuse them with "cached plan must not change result type" on every
// connection until it is recycled.
func TestPreparedStatementsSurviveAColumnTypeChange(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openOneConnection(t, url, true)
	store := func(at time.Time) {
		t.Helper()
		u := upload(hostA, at, "bash")
		check, err := s.CheckUpload(ctx, u)
		if err != nil {
			t.Fatalf("check upload at %s: %v", at, err)
		}
		if res, err := s.StoreEvaluatedSystem(ctx, u, evaluation("RHSA-1", "installable"), check); err != nil || !res.Applied {
			t.Fatalf("store upload at %s: %+v, %v", at, res, err)
		}
	}
	store(t0)                  // the insert path
	store(t0.Add(time.Minute)) // the update path: every statement prepared on the one connection
	db := openAdmin(t, url)
	for _, ddl := range []string{
		`ALTER TABLE system ALTER COLUMN last_evaluated_event_time TYPE timestamp`,
		`ALTER TABLE system ALTER COLUMN last_event_time TYPE timestamp`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	store(t0.Add(2 * time.Minute))
	store(t0.Add(3 * time.Minute))
}

// A migration that changes the type of a column a prepared statement's
// parameter was inferred from (here reporter, text to an enum) makes the
// server refuse the statement, analysed again with the old parameter type
// (42804). It costs its connection one transient error: the retry prepares
// afresh, as text is parsed afresh. (Before, every store failed until the
// connection was recycled, 30 minutes later.)
func TestPreparedStatementsSurviveAParameterTypeChange(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			ctx := context.Background()
			url := pgtest.URL(t)
			s := openOneConnection(t, url, prepared)
			store := func(at time.Time) error {
				u := upload(hostA, at, "bash")
				check, err := s.CheckUpload(ctx, u)
				if err != nil {
					return fmt.Errorf("check: %w", err)
				}
				res, err := s.StoreEvaluatedSystem(ctx, u, evaluation("RHSA-1", "installable"), check)
				if err != nil {
					return fmt.Errorf("store: %w", err)
				}
				if !res.Applied {
					return fmt.Errorf("not applied: %+v", res)
				}
				return nil
			}
			for i := range 3 {
				if err := store(t0.Add(time.Duration(i) * time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			db := openAdmin(t, url)
			if _, err := db.ExecContext(ctx, `CREATE TYPE reporter_t AS ENUM ('', 'puptoo', 'yupana', 'rhsm-conduit');
				ALTER TABLE system ALTER COLUMN reporter DROP DEFAULT,
					ALTER COLUMN reporter TYPE reporter_t USING reporter::reporter_t,
					ALTER COLUMN reporter SET DEFAULT ''`); err != nil {
				t.Fatal(err)
			}
			failed := 0
			for i := 3; i < 6; i++ {
				err := store(t0.Add(time.Duration(i) * time.Minute))
				if err != nil && messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_TRANSIENT && failed == 0 {
					failed++
					err = store(t0.Add(time.Duration(i) * time.Minute)) // the pipeline's retry
				}
				if err != nil {
					t.Errorf("after the migration, store %d: %v", i, err)
				}
			}
		})
	}
}
