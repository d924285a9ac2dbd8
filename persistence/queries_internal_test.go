package persistence

import (
	"database/sql"
	"reflect"
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// The reads' plans on 20,000 systems in 20 orgs, stored straight into
// schema 2's arrays and vacuumed: each system has 40 of 1,000 common
// packages and 30 of 1,000 common advisories, and one of 1,000 rare ones of
// each (a rare build or advisory is on 20 systems). The listing of the
// systems that a rare advisory affects, or that have a rare package name,
// goes through the arrays' GIN index, on any page; the reads of one system
// through its inventory id; no read scans the system table whole. (For a
// common advisory on rows as small as these, reading the org's systems and
// checking each one's array is the planner's right choice; the benchmark
// counts the scans of the real reads on 50,000 systems of real size.)
func TestReadsUseTheIndexes(t *testing.T) {
	db, err := sql.Open("postgres", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Migrate(db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO account (id, org_id) SELECT n, 'org-' || n FROM generate_series(1, 20) n`,
		`INSERT INTO package_name (id, name) SELECT n, 'pkg-' || n FROM generate_series(1, 1500) n`,
		`INSERT INTO package (id, name_id, evra)
			SELECT n, CASE WHEN n <= 1000 THEN 1 + n % 500 ELSE n - 500 END, '0:1.' || n || '-1.el9.x86_64' FROM generate_series(1, 2000) n`,
		`INSERT INTO advisory (id, name, advisory_type) SELECT n, 'RHSA-' || n, 'security' FROM generate_series(1, 2000) n`,
		`INSERT INTO system (id, account_id, inventory_id, display_name, profile_checksum, last_upload, last_event_time,
				package_ids, advisory_ids, installable_advisory_ids, advisory_first_reported)
			SELECT s, 1 + s % 20, md5(s::text)::uuid, 'host ' || s, md5(s::text), now(), now(),
				ARRAY(SELECT DISTINCT 1 + (s * 7 + k * 13) % 1000 FROM generate_series(0, 39) k ORDER BY 1) || (1001 + s % 1000)::bigint,
				ARRAY(SELECT DISTINCT 1 + (s * 11 + k * 17) % 1000 FROM generate_series(0, 29) k ORDER BY 1) || 1001 + s % 1000,
				ARRAY(SELECT DISTINCT 1 + (s * 11 + k * 17) % 1000 FROM generate_series(0, 29, 2) k ORDER BY 1),
				array_fill(now(), ARRAY[31])
			FROM generate_series(1, 20000) s`,
		`VACUUM ANALYZE`, // as autovacuum would: also empties the GIN indexes' pending lists, which planning counts
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The rare advisory and build 1043 are on the systems 42, 1042, ...,
	// all of org 3 (account 3).
	var inventoryID string
	var builds pq.Int64Array
	if err := db.QueryRow(`SELECT inventory_id, ARRAY(SELECT id FROM package WHERE name_id = 543) FROM system WHERE id = 42`).Scan(&inventoryID, &builds); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(builds, pq.Int64Array{1043}) {
		t.Fatalf("the rare name's builds: %v", builds)
	}
	for _, c := range []struct {
		name  string
		query string
		args  []any
		uses  string
	}{
		{"advisories of a system", systemAdvisoriesQuery, []any{"org-3", inventoryID}, "system_inventory_id"},
		{"packages of a system", systemPackagesQuery, []any{"org-3", inventoryID}, "system_inventory_id"},
		{"systems an advisory affects", advisorySystemsQuery, []any{3, 1043, 0, PageSize + 1}, "system_advisory_ids"},
		{"systems an advisory affects, a later page", advisorySystemsQuery, []any{3, 1043, 10000, PageSize + 1}, "system_advisory_ids"},
		{"systems with a package name", packageSystemsQuery, []any{3, builds, 0, PageSize + 1}, "system_package_ids"},
		{"systems with a package name, a later page", packageSystemsQuery, []any{3, builds, 10000, PageSize + 1}, "system_package_ids"},
	} {
		rows, err := db.Query(`EXPLAIN `+c.query, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, c.uses) || strings.Contains(text, "Seq Scan on system") {
			t.Errorf("%s: the plan does not use %s, or scans every system:\n%s", c.name, c.uses, text)
		}
	}
}
