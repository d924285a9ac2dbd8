package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// tinyReads is a plan small enough for a test, dense enough that the
// listings run to several pages: one org, 250 systems with 400 of 450
// package names each, 200 advisories.
func tinyReads() ReadsPlan {
	return ReadsPlan{Systems: 250, PackagesPerSystem: 400, PackageNames: 450, Advisories: 200, Orgs: 1,
		Calls: 40, MinCalls: 40, Warmup: 2, Budget: time.Minute, Seed: 3, PopulateConns: 2}
}

func openDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// schemaOf lists the constraints and indexes of the system tables.
func schemaOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`
		SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated FROM pg_constraint
		WHERE conrelid IN ('system'::regclass, 'system_package'::regclass, 'system_advisory'::regclass)
		UNION ALL
		SELECT indexdef FROM pg_indexes WHERE tablename IN ('system', 'system_package', 'system_advisory')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// The populated database is schema 1 as migration 0001 makes it (the keys
// dropped for the load are back, the same, validated), holding the plan's
// dataset; and the old schema's SQL and package persistence give the same
// whole listings, page by page, before and after the real migration.
func TestOldAndNewSchemasAnswerAlike(t *testing.T) {
	p := tinyReads()
	ctx := context.Background()
	fresh := openDB(t, pgtest.URL(t))
	if err := persistence.MigrateTo(fresh, 1); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	db := openDB(t, url)
	if err := persistence.MigrateTo(db, 1); err != nil {
		t.Fatal(err)
	}
	if err := populateV1(ctx, db, p, t.Logf); err != nil {
		t.Fatal(err)
	}
	if got, want := schemaOf(t, db), schemaOf(t, fresh); !reflect.DeepEqual(got, want) {
		t.Fatalf("populated schema\n%s\nwant migration 0001's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	shape, err := readShape(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	perSystem := float64(shape.systemAdvisories) / float64(shape.systems)
	if shape.systems != 250 || shape.systemPackages != 250*400 || perSystem < 50 || shape.installableShare < 0.75 || shape.installableShare > 0.92 {
		t.Fatalf("dataset %+v (%.0f advisories a system)", shape, perSystem)
	}
	var multi int
	if err := db.QueryRow(`SELECT count(DISTINCT system_id) FROM system_package sp JOIN package p ON p.id = sp.package_id
		GROUP BY p.name_id ORDER BY 1 DESC LIMIT 1`).Scan(&multi); err != nil || multi < 2*persistence.PageSize {
		t.Fatalf("the most installed name is on %d systems (%v), want more than two pages", multi, err)
	}

	// Questions: every name of every read, listings walked to their end.
	var names [2][]string
	for i, q := range []string{`SELECT name FROM advisory ORDER BY id LIMIT 30`, `SELECT name FROM package_name ORDER BY id LIMIT 30`} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names[i] = append(names[i], n)
		}
		rows.Close()
	}
	names[0] = append(names[0], "RHSA-2026:99999")
	names[1] = append(names[1], "no-such-package")
	var systems []string
	rows, err := db.Query(`SELECT inventory_id FROM system ORDER BY id LIMIT 40`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		systems = append(systems, s)
	}
	rows.Close()
	const org = "org-00000"
	everything := func(r reader) (out []string) {
		add := func(v any, err error) {
			out = append(out, fmt.Sprintf("%+v %v", v, err))
		}
		for _, inv := range append(systems, "00000000-0000-4000-8000-000000000000") {
			add(r.systemAdvisories(ctx, org, inv))
			add(r.systemPackages(ctx, org, inv))
		}
		for _, n := range names[0] {
			for after := int64(0); ; {
				page, next, err := r.advisorySystems(ctx, org, n, after)
				add(page, err)
				if next == 0 || err != nil {
					break
				}
				after = next
			}
		}
		for _, n := range names[1] {
			for after := int64(0); ; {
				page, next, err := r.packageSystems(ctx, org, n, after)
				add(page, err)
				if next == 0 || err != nil {
					break
				}
				after = next
			}
		}
		page, next, err := r.advisorySystems(ctx, "org-99999", names[0][0], 0)
		add(fmt.Sprint(page, next), err)
		return out
	}
	before := everything(oldSchema{db})
	if err := persistence.Migrate(db); err != nil {
		t.Fatal(err)
	}
	store, err := persistence.Open(ctx, url, persistence.PoolSettings{MaxOpen: 2, MaxIdle: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	after := everything(newSchema{store})
	pages := 0
	for i := range max(len(before), len(after)) {
		if i >= len(before) || i >= len(after) || before[i] != after[i] {
			t.Fatalf("answer %d differs (of %d and %d):\nschema 1: %.500s\nschema 2: %.500s", i, len(before), len(after), at(before, i), at(after, i))
		}
		if strings.HasPrefix(before[i], "[{ID:") {
			pages++
		}
	}
	if pages < 2*len(names[0]) {
		t.Errorf("only %d pages of systems listed", pages)
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// The scenario runs end to end at a tiny size: both schemas timed on the
// same questions, every answer compared and alike, the migration timed.
func TestReadsScenario(t *testing.T) {
	url := pgtest.URL(t) // skips, or fails, without a server
	r := &Reads{DatabaseURL: url, Plan: tinyReads(), Log: testLog{t}}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.MigratedTo < 2 || res.MigrateSeconds <= 0 || res.Systems != 250 || len(res.Timings) != 8 {
		t.Fatalf("result %+v", res)
	}
	if res.Compared != 4*r.Plan.Calls || res.Differed != 0 {
		t.Fatalf("compared %d answers, %d differed: %s", res.Compared, res.Differed, res.FirstDifference)
	}
	for _, tm := range res.Timings {
		if tm.Calls != r.Plan.Calls || tm.P50MS <= 0 || tm.P99MS < tm.P50MS || tm.MeanRow <= 0 || len(tm.Scans) == 0 {
			t.Errorf("timing %+v", tm)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// The reads' verdict follows the numbers: a median over 20 ms on the new
// schema, or an answer that differs, is not met; the section is written.
func TestReadsTarget(t *testing.T) {
	res := &ReadsResult{Plan: FullReadsPlan(), Systems: 50000, MigratedTo: 2, Compared: 1200}
	for i, read := range readNames {
		res.Timings = append(res.Timings,
			ReadTiming{Read: read, Schema: 1, Calls: 300, P50MS: 100 + float64(i), Scans: map[string]int64{"seq system_package": 20}},
			ReadTiming{Read: read, Schema: 2, Calls: 300, P50MS: 2 + float64(i), Scans: map[string]int64{"system_advisory_ids": 300}})
	}
	r := NewReport("test")
	r.Reads = res
	row := func() [4]string {
		for _, row := range r.targets() {
			if strings.HasPrefix(row[0], "7. reads") {
				return row
			}
		}
		t.Fatal("no reads row")
		return [4]string{}
	}
	if got := row(); got[3] != "met" || !strings.Contains(got[2], "p50 2.0 / 3.0 / 4.0 / 5.0 ms (schema 1: 100.0 / 101.0 / 102.0 / 103.0 ms)") {
		t.Errorf("row %q", got)
	}
	res.Timings[7].P50MS = 20.5
	if got := row(); got[3] != "**not met**" {
		t.Errorf("a median of 20.5 ms: %q", got)
	}
	res.Timings[7].P50MS = 5
	res.Differed, res.FirstDifference = 1, "x"
	if got := row(); got[3] != "**not met**" || !strings.Contains(got[2], "1 of 1200 answers differed") {
		t.Errorf("an answer that differed: %q", got)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 50000: "50,000", 20000000: "20,000,000", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	path := filepath.Join(t.TempDir(), "b.md")
	if err := r.WriteMarkdown(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 7. Reads", "of 50,000 systems in 50 orgs", "| systems an advisory affects (a page) | 2 | 300 |", "system_advisory_ids 300", "First difference: x"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// Forgetting the stored hosts between the comparison's runs empties the
// system tables and keeps the shared rows; on a database not migrated yet it
// does nothing.
func TestForgetSystemsKeepsTheSharedRows(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	if err := forgetSystems(ctx, url); err != nil {
		t.Fatalf("before the schema exists: %v", err)
	}
	db := openDB(t, url)
	if err := persistence.Migrate(db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO account (org_id) VALUES ('o1')`,
		`INSERT INTO package_name (name) VALUES ('kernel')`,
		`INSERT INTO system (account_id, inventory_id, profile_checksum, last_upload, last_event_time) SELECT id, gen_random_uuid(), 'c', now(), now() FROM account`,
		`INSERT INTO deleted_system (inventory_id, org_id, event_time) VALUES (gen_random_uuid(), 'o1', now())`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := forgetSystems(ctx, url); err != nil {
		t.Fatal(err)
	}
	count := func(table string) (n int) {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil { // table is a constant of this test
			t.Fatal(err)
		}
		return n
	}
	if s, d := count("system"), count("deleted_system"); s != 0 || d != 0 {
		t.Errorf("after forgetting: %d systems, %d deleted systems, want none", s, d)
	}
	if a, p := count("account"), count("package_name"); a != 1 || p != 1 {
		t.Errorf("after forgetting: %d accounts, %d package names, want the 1 of each stored", a, p)
	}
}
