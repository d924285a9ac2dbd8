package persistence

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// v1Rows reads a schema-1 database's per-system rows, as
// "system package" and "system advisory status first_reported" lines.
func v1Rows(t *testing.T, db *sql.DB) (pkgs, advs []string) {
	t.Helper()
	for _, q := range []struct {
		dst   *[]string
		query string
	}{
		{&pkgs, `SELECT s.inventory_id || ' ' || p.evra FROM system_package sp JOIN system s ON s.id = sp.system_id
			JOIN package p ON p.id = sp.package_id ORDER BY 1`},
		{&advs, `SELECT s.inventory_id || ' ' || a.name || ' ' || sa.status || ' ' || to_char(sa.first_reported AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')
			FROM system_advisory sa JOIN system s ON s.id = sa.system_id JOIN advisory a ON a.id = sa.advisory_id ORDER BY 1`},
	} {
		rows, err := db.Query(q.query)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			*q.dst = append(*q.dst, line)
		}
		rows.Close()
	}
	return pkgs, advs
}

// migrateStep returns a function that moves db's schema to a version, up
// or down, failing t if it cannot.
func migrateStep(t *testing.T, db *sql.DB) func(v uint) {
	return func(v uint) {
		t.Helper()
		if err := migrateWith(db, func(m *migrate.Migrate) error { return m.Migrate(v) }); err != nil {
			t.Fatal(err)
		}
	}
}

// Migration 2 moves a schema-1 database's package and advisory rows into
// the systems' arrays (statuses and first-reported times kept), the store
// reads them back, and its down migration restores the rows it moved.
func TestMigrationToArraysKeepsTheData(t *testing.T) {
	db, err := sql.Open("postgres", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	to := migrateStep(t, db)
	to(1)
	const (
		hostA = "8a3f1c2e-0000-4000-8000-000000000001"
		hostB = "8a3f1c2e-0000-4000-8000-000000000002"
		hostC = "8a3f1c2e-0000-4000-8000-000000000003" // nothing installed, nothing affecting it
	)
	for _, q := range []string{
		`INSERT INTO account (id, org_id) VALUES (1, 'org-1')`,
		`INSERT INTO system (id, account_id, inventory_id, profile_checksum, last_upload, last_event_time, last_evaluated_event_time)
			VALUES (10, 1, '` + hostA + `', 'a', now(), '2026-11-30 10:00:00+00', '2026-11-30 10:00:00+00'),
			       (11, 1, '` + hostB + `', 'b', now(), '2026-11-30 11:00:00+00', '2026-11-30 11:00:00+00'),
			       (12, 1, '` + hostC + `', 'c', now(), '2026-11-30 12:00:00+00', NULL)`,
		`INSERT INTO package_name (id, name) VALUES (1, 'bash'), (2, 'kernel')`,
		`INSERT INTO package (id, name_id, evra) VALUES (100, 1, '0:5.1-1.x86_64'), (101, 2, '0:4.18-1.x86_64'), (99, 2, '0:4.18-2.x86_64')`,
		`INSERT INTO system_package (system_id, package_id) VALUES (10, 100), (10, 101), (11, 99), (11, 100)`,
		`INSERT INTO advisory (id, name, advisory_type) VALUES (5, 'RHSA-1', 'security'), (3, 'RHBA-2', 'bugfix')`,
		`INSERT INTO system_advisory (system_id, advisory_id, status, first_reported) VALUES
			(10, 5, 'installable', '2026-11-01 08:00:00+00'), (10, 3, 'applicable', '2026-11-02 09:00:00+00'),
			(11, 3, 'installable', '2026-11-03 10:00:00+00')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pkgs1, advs1 := v1Rows(t, db)

	to(2)
	var ids, installable, first string
	if err := db.QueryRow(`SELECT advisory_ids::text, installable_advisory_ids::text, advisory_first_reported::text FROM system WHERE id = 10`).
		Scan(&ids, &installable, &first); err != nil {
		t.Fatal(err)
	}
	if ids != "{3,5}" || installable != "{5}" || first != `{"2026-11-02 09:00:00+00","2026-11-01 08:00:00+00"}` {
		t.Fatalf("host A's advisories moved as %s, installable %s, first reported %s", ids, installable, first)
	}
	if _, err := db.Exec(`SET TIME ZONE 'UTC'`); err != nil {
		t.Fatal(err)
	}
	var started time.Time
	if err := db.QueryRow(`SELECT pg_postmaster_start_time()`).Scan(&started); err != nil {
		t.Fatal(err)
	}
	s := &Store{db: db, admit: newAdmission(4), ids: newIDCache(0)}
	s.ids.seeServer(started) // as Open does
	ctx := context.Background()
	want := map[string]struct {
		pkgs []Package
		advs map[string]AdvisoryStatus
	}{
		hostA: {[]Package{{"bash", "0:5.1-1.x86_64"}, {"kernel", "0:4.18-1.x86_64"}}, map[string]AdvisoryStatus{"RHSA-1": Installable, "RHBA-2": Applicable}},
		hostB: {[]Package{{"bash", "0:5.1-1.x86_64"}, {"kernel", "0:4.18-2.x86_64"}}, map[string]AdvisoryStatus{"RHBA-2": Installable}},
		hostC: {nil, map[string]AdvisoryStatus{}},
	}
	for host, w := range want {
		st, err := s.LoadSystem(ctx, "org-1", host)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st.Packages, w.pkgs) || !reflect.DeepEqual(st.Advisories, w.advs) {
			t.Fatalf("%s after the migration: packages %v, advisories %v; want %v, %v", host, st.Packages, st.Advisories, w.pkgs, w.advs)
		}
	}
	// Host A re-evaluated: RHSA-1 kept (its first report too), RHBA-2 fixed, RHEA-3 new.
	e := Evaluation{Advisories: []AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: Applicable}, {Name: "RHEA-3", Type: "enhancement", Status: Installable}}}
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if ok, err := s.StoreEvaluation(ctx, UploadResult{SystemID: 10, EventTime: at}, e); err != nil || !ok {
		t.Fatalf("store evaluation: %v %v", ok, err)
	}
	var kept string
	if err := db.QueryRow(`SELECT to_char(f AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') FROM system s, unnest(s.advisory_ids, s.advisory_first_reported) AS a (id, f)
		WHERE s.id = 10 AND a.id = 5`).Scan(&kept); err != nil || kept != "2026-11-01 08:00" {
		t.Fatalf("RHSA-1 first reported %q after re-evaluation (%v), want 2026-11-01 08:00", kept, err)
	}
	// Back to host A's first advisory set, with its first reports, for the down migration.
	if _, err := db.Exec(`UPDATE system SET advisory_ids = '{3,5}', installable_advisory_ids = '{5}',
		advisory_first_reported = '{"2026-11-02 09:00:00+00","2026-11-01 08:00:00+00"}' WHERE id = 10`); err != nil {
		t.Fatal(err)
	}

	to(1)
	pkgs2, advs2 := v1Rows(t, db)
	if !reflect.DeepEqual(pkgs1, pkgs2) || !reflect.DeepEqual(advs1, advs2) {
		t.Fatalf("down migration: packages %v, advisories %v; want %v, %v", pkgs2, advs2, pkgs1, advs1)
	}
}
