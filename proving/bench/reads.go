package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/patchflow/patchflow/persistence"
)

// The four reads a patch service serves, as the report names them.
const (
	ReadSystemAdvisories = "advisories of a system"
	ReadAdvisorySystems  = "systems an advisory affects (a page)"
	ReadSystemPackages   = "packages of a system"
	ReadPackageSystems   = "systems with a package name (a page)"
)

// readNames lists the reads in the report's order.
var readNames = []string{ReadSystemAdvisories, ReadAdvisorySystems, ReadSystemPackages, ReadPackageSystems}

// readsTargetMS is issue 12's bound on each read's median on the new schema.
const readsTargetMS = 20.0

// ReadsResult is the reads scenario: one database populated at schema
// version 1, the reads timed with schema 1's SQL, the same database
// migrated to the latest version, the reads timed with persistence's.
type ReadsResult struct {
	Plan ReadsPlan `json:"plan"`
	// What the database held.
	Systems          int64   `json:"systems"`
	PackageBuilds    int64   `json:"package_builds"`
	Advisories       int64   `json:"advisories"`
	SystemPackages   int64   `json:"system_package_rows"`
	SystemAdvisories int64   `json:"system_advisory_rows"`
	InstallableShare float64 `json:"installable_share"`
	// Seconds of each step.
	PopulateSeconds float64      `json:"populate_seconds"`
	VacuumV1Seconds float64      `json:"vacuum_analyze_v1_seconds"`
	MigrateSeconds  float64      `json:"migrate_seconds"` // version 1 to MigratedTo, with the real migrations
	MigratedTo      uint         `json:"migrated_to"`
	VacuumV2Seconds float64      `json:"vacuum_analyze_v2_seconds"`
	SizeV1MiB       float64      `json:"database_v1_mib"`
	SizeV2MiB       float64      `json:"database_v2_mib"` // after the migration and VACUUM (space freed for reuse, not returned)
	Settings        string       `json:"server_settings"`
	Timings         []ReadTiming `json:"timings"`
	Compared        int          `json:"answers_compared"` // calls asked of both schemas
	Differed        int          `json:"answers_differed"`
	FirstDifference string       `json:"first_difference,omitempty"`
}

// ReadTiming is one read on one schema.
type ReadTiming struct {
	Read    string  `json:"read"`
	Schema  uint    `json:"schema"`
	Calls   int     `json:"calls"`
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
	MeanMS  float64 `json:"mean_ms"`
	MaxMS   float64 `json:"max_ms"`
	MeanRow float64 `json:"mean_rows"`
	// Load is the machine's 1-minute load average when the calls began
	// (-1: unknown).
	Load float64 `json:"load"`
	// Scans counts, over the timed calls, the scans of the system tables
	// and their indexes (PostgreSQL's pg_stat_user_tables and
	// pg_stat_user_indexes): "seq <table>" or the index's name.
	Scans map[string]int64 `json:"scans"`
}

// Reads runs the reads scenario on the PostgreSQL server of DatabaseURL,
// in a database of its own that it drops at the end.
type Reads struct {
	DatabaseURL string
	Plan        ReadsPlan
	Log         io.Writer
}

// reader is one schema's implementation of the four reads.
type reader interface {
	systemAdvisories(ctx context.Context, orgID, inventoryID string) ([]persistence.SystemAdvisory, error)
	advisorySystems(ctx context.Context, orgID, advisory string, after int64) ([]persistence.AffectedSystem, int64, error)
	systemPackages(ctx context.Context, orgID, inventoryID string) ([]persistence.Package, error)
	packageSystems(ctx context.Context, orgID, name string, after int64) ([]persistence.InstalledSystem, int64, error)
}

// newSchema is the reads of package persistence, on schema version 2 and later.
type newSchema struct{ s *persistence.Store }

func (n newSchema) systemAdvisories(ctx context.Context, org, inv string) ([]persistence.SystemAdvisory, error) {
	return n.s.SystemAdvisories(ctx, org, inv)
}

func (n newSchema) advisorySystems(ctx context.Context, org, adv string, after int64) ([]persistence.AffectedSystem, int64, error) {
	return n.s.AdvisorySystems(ctx, org, adv, after)
}

func (n newSchema) systemPackages(ctx context.Context, org, inv string) ([]persistence.Package, error) {
	return n.s.SystemPackages(ctx, org, inv)
}

func (n newSchema) packageSystems(ctx context.Context, org, name string, after int64) ([]persistence.InstalledSystem, int64, error) {
	return n.s.PackageSystems(ctx, org, name, after)
}

// question is one call's arguments.
type question struct {
	org, inventoryID string // the reads of a system
	name             string // an advisory or a package name
	after            int64  // the page's cursor
}

// answer is what a call returned (its rows, and a page's next cursor).
type answer struct {
	rows any
	n    int
	next int64
}

func ask(ctx context.Context, r reader, read string, q question) (answer, error) {
	switch read {
	case ReadSystemAdvisories:
		a, err := r.systemAdvisories(ctx, q.org, q.inventoryID)
		return answer{rows: a, n: len(a)}, err
	case ReadAdvisorySystems:
		a, next, err := r.advisorySystems(ctx, q.org, q.name, q.after)
		return answer{rows: a, n: len(a), next: next}, err
	case ReadSystemPackages:
		a, err := r.systemPackages(ctx, q.org, q.inventoryID)
		return answer{rows: a, n: len(a)}, err
	case ReadPackageSystems:
		a, next, err := r.packageSystems(ctx, q.org, q.name, q.after)
		return answer{rows: a, n: len(a), next: next}, err
	}
	return answer{}, fmt.Errorf("unknown read %q", read)
}

func (r *Reads) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, "reads: "+format+"\n", args...)
	}
}

// Run populates, measures, migrates and measures again.
func (r *Reads) Run(ctx context.Context) (*ReadsResult, error) {
	p := r.Plan
	res := &ReadsResult{Plan: p}
	name := fmt.Sprintf("pf_bench_reads_%d", time.Now().UnixNano())
	dbURL, err := createDatabase(ctx, r.DatabaseURL, name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dropDatabase(context.Background(), r.DatabaseURL, name) }()
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if res.Settings, err = serverSettings(ctx, db); err != nil {
		return nil, err
	}
	if err := persistence.MigrateTo(db, 1); err != nil {
		return nil, err
	}
	r.logf("populating schema version 1 with %d systems of %d packages", p.Systems, p.PackagesPerSystem)
	start := time.Now()
	if err := populateV1(ctx, db, p, r.logf); err != nil {
		return nil, err
	}
	res.PopulateSeconds = time.Since(start).Seconds()
	if res.VacuumV1Seconds, err = timed(func() error { return vacuumAnalyze(ctx, db) }); err != nil {
		return nil, err
	}
	shape, err := readShape(ctx, db)
	if err != nil {
		return nil, err
	}
	res.Systems, res.PackageBuilds, res.Advisories = shape.systems, shape.builds, shape.advisories
	res.SystemPackages, res.SystemAdvisories, res.InstallableShare = shape.systemPackages, shape.systemAdvisories, shape.installableShare
	if res.SizeV1MiB, err = databaseMiB(ctx, db); err != nil {
		return nil, err
	}
	r.logf("populated in %.1f s (VACUUM ANALYZE %.1f s): %d system_package rows, %d system_advisory rows, %.0f MiB",
		res.PopulateSeconds, res.VacuumV1Seconds, res.SystemPackages, res.SystemAdvisories, res.SizeV1MiB)
	questions, err := askWhat(ctx, db, p)
	if err != nil {
		return nil, err
	}

	// Schema 1, on one connection: the calls are timed one at a time.
	db.SetMaxOpenConns(1)
	old, oldAnswers, err := r.measure(ctx, 1, oldSchema{db}, db, db, questions)
	if err != nil {
		return nil, err
	}
	res.Timings = append(res.Timings, old...)
	db.SetMaxOpenConns(0)

	r.logf("migrating to the latest version")
	if res.MigrateSeconds, err = timed(func() error { return persistence.Migrate(db) }); err != nil {
		return nil, err
	}
	version, dirty, err := persistence.SchemaVersion(db)
	if err != nil {
		return nil, err
	}
	if dirty || version < 2 {
		return nil, fmt.Errorf("after the migration the schema is at version %d (dirty %v)", version, dirty)
	}
	res.MigratedTo = version
	if res.VacuumV2Seconds, err = timed(func() error { return vacuumAnalyze(ctx, db) }); err != nil {
		return nil, err
	}
	if res.SizeV2MiB, err = databaseMiB(ctx, db); err != nil {
		return nil, err
	}
	r.logf("migrated to version %d in %.1f s (VACUUM ANALYZE %.1f s), %.0f MiB", version, res.MigrateSeconds, res.VacuumV2Seconds, res.SizeV2MiB)

	store, err := persistence.Open(ctx, dbURL, persistence.PoolSettings{MaxOpen: 1, MaxIdle: 1})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	cur, newAnswers, err := r.measure(ctx, version, newSchema{store}, store.DB(), db, questions)
	if err != nil {
		return nil, err
	}
	res.Timings = append(res.Timings, cur...)
	for _, read := range readNames {
		a, b := oldAnswers[read], newAnswers[read]
		for i := 0; i < min(len(a), len(b)); i++ {
			res.Compared++
			if !reflect.DeepEqual(a[i], b[i]) {
				res.Differed++
				if res.FirstDifference == "" {
					res.FirstDifference = fmt.Sprintf("%s %+v: schema 1 %s, schema %d %s", read, questions[read][p.Warmup+i], brief(a[i]), version, brief(b[i]))
				}
			}
		}
	}
	r.logf("answers compared: %d, differed: %d", res.Compared, res.Differed)
	return res, nil
}

// brief describes an answer in a line.
func brief(a answer) string {
	s := fmt.Sprintf("%+v", a.rows)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return fmt.Sprintf("%d rows, next %d: %s", a.n, a.next, s)
}

func timed(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return time.Since(start).Seconds(), err
}

// measure times each read over its questions on one schema: warm-up calls
// first, then the timed ones, until Calls or, past MinCalls, Budget. calls
// is the pool the calls run on (one connection), stats another connection
// to the same database that reads the scan counters.
func (r *Reads) measure(ctx context.Context, schema uint, rd reader, calls, stats *sql.DB, questions map[string][]question) ([]ReadTiming, map[string][]answer, error) {
	p := r.Plan
	var out []ReadTiming
	answers := map[string][]answer{}
	for _, read := range readNames {
		qs := questions[read]
		for _, q := range qs[:p.Warmup] {
			if _, err := ask(ctx, rd, read, q); err != nil {
				return nil, nil, fmt.Errorf("schema %d, %s: %w", schema, read, err)
			}
		}
		before, err := scanCounts(ctx, calls, stats)
		if err != nil {
			return nil, nil, err
		}
		load, err := loadAverage()
		if err != nil {
			load = -1
		}
		var took []time.Duration
		rows := 0
		start := time.Now()
		for _, q := range qs[p.Warmup:] {
			if len(took) >= p.MinCalls && time.Since(start) > p.Budget {
				break
			}
			t0 := time.Now()
			a, err := ask(ctx, rd, read, q)
			took = append(took, time.Since(t0))
			if err != nil {
				return nil, nil, fmt.Errorf("schema %d, %s %+v: %w", schema, read, q, err)
			}
			rows += a.n
			answers[read] = append(answers[read], a)
		}
		after, err := scanCounts(ctx, calls, stats)
		if err != nil {
			return nil, nil, err
		}
		t := summarize(read, schema, took)
		t.MeanRow = float64(rows) / float64(len(took))
		t.Load = load
		t.Scans = map[string]int64{}
		for k, v := range after {
			if d := v - before[k]; d > 0 {
				t.Scans[k] = d
			}
		}
		r.logf("schema %d, %-38s %3d calls: p50 %7.2f ms, p99 %7.2f ms, mean %7.2f ms; %.0f rows a call; load %.1f; scans %v",
			schema, read, t.Calls, t.P50MS, t.P99MS, t.MeanMS, t.MeanRow, t.Load, t.Scans)
		out = append(out, t)
	}
	return out, answers, nil
}

func summarize(read string, schema uint, took []time.Duration) ReadTiming {
	ms := make([]float64, len(took))
	sum := 0.0
	for i, d := range took {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	sort.Float64s(ms)
	t := ReadTiming{Read: read, Schema: schema, Calls: len(ms)}
	if len(ms) > 0 {
		t.P50MS, t.P99MS, t.MeanMS, t.MaxMS = percentile(ms, 0.50), percentile(ms, 0.99), sum/float64(len(ms)), ms[len(ms)-1]
	}
	return t
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, q float64) float64 {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// scanCounts reads the scan counters of the system tables and their
// indexes. The connection of the calls flushes its counters first
// (PostgreSQL 15 keeps a backend's counters for up to a second otherwise).
func scanCounts(ctx context.Context, calls, stats *sql.DB) (map[string]int64, error) {
	if _, err := calls.ExecContext(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return nil, fmt.Errorf("flush statistics: %w", err)
	}
	rows, err := stats.QueryContext(ctx, `
		SELECT 'seq ' || relname, seq_scan FROM pg_stat_user_tables WHERE relname IN ('system', 'system_package', 'system_advisory')
		UNION ALL
		SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname IN ('system', 'system_package', 'system_advisory')`)
	if err != nil {
		return nil, fmt.Errorf("scan counts: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// askWhat draws the questions of every read, the same for both schemas:
// Warmup + Calls each. A system is drawn at random; a page's advisory or
// package name is one of a random system's (so it affects, or is installed
// on, at least that system of its org: what a user following a link from a
// system would ask); half the pages are first pages, the others start
// after a random system id.
func askWhat(ctx context.Context, db *sql.DB, p ReadsPlan) (map[string][]question, error) {
	type sys struct {
		id       int64
		org, inv string
	}
	rows, err := db.QueryContext(ctx, `SELECT s.id, a.org_id, s.inventory_id FROM system s JOIN account a ON a.id = s.account_id ORDER BY s.id`)
	if err != nil {
		return nil, err
	}
	var systems []sys
	for rows.Next() {
		var s sys
		if err := rows.Scan(&s.id, &s.org, &s.inv); err != nil {
			rows.Close()
			return nil, err
		}
		systems = append(systems, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(systems) == 0 {
		return nil, errors.New("no systems to ask about")
	}
	rng := rand.New(rand.NewPCG(p.Seed, 12))
	n := p.Warmup + p.Calls
	out := map[string][]question{}
	pick := func() sys { return systems[rng.IntN(len(systems))] }
	cursor := func() int64 {
		if rng.IntN(2) == 0 {
			return 0
		}
		return systems[rng.IntN(len(systems))].id
	}
	for range n {
		s := pick()
		out[ReadSystemAdvisories] = append(out[ReadSystemAdvisories], question{org: s.org, inventoryID: s.inv})
		s = pick()
		out[ReadSystemPackages] = append(out[ReadSystemPackages], question{org: s.org, inventoryID: s.inv})
	}
	for _, c := range []struct {
		read, query string
	}{
		{ReadAdvisorySystems, `SELECT a.name FROM system_advisory sa JOIN advisory a ON a.id = sa.advisory_id
			WHERE sa.system_id = $1 ORDER BY hashint8extended(sa.advisory_id, $2), a.name LIMIT 1`},
		{ReadPackageSystems, `SELECT pn.name FROM system_package sp JOIN package p ON p.id = sp.package_id JOIN package_name pn ON pn.id = p.name_id
			WHERE sp.system_id = $1 ORDER BY hashint8extended(sp.package_id, $2), pn.name LIMIT 1`},
	} {
		for len(out[c.read]) < n {
			s := pick()
			var name string
			err := db.QueryRowContext(ctx, c.query, s.id, rng.Int64()).Scan(&name)
			if errors.Is(err, sql.ErrNoRows) {
				continue // a system affected by nothing
			}
			if err != nil {
				return nil, err
			}
			out[c.read] = append(out[c.read], question{org: s.org, name: name, after: cursor()})
		}
	}
	return out, nil
}

func databaseMiB(ctx context.Context, db *sql.DB) (float64, error) {
	var b int64
	err := db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&b)
	return float64(b) / (1 << 20), err
}

// serverSettings are the server settings that bear on reads.
func serverSettings(ctx context.Context, db *sql.DB) (string, error) {
	names := []string{"server_version", "shared_buffers", "work_mem", "effective_cache_size", "random_page_cost", "jit",
		"max_parallel_workers_per_gather", "fsync", "synchronous_commit", "full_page_writes"}
	var parts []string
	for _, n := range names {
		var v string
		if err := db.QueryRowContext(ctx, `SELECT current_setting($1)`, n).Scan(&v); err != nil {
			return "", err
		}
		parts = append(parts, n+" "+v)
	}
	return strings.Join(parts, ", "), nil
}

// scanText lists scan counts, the most first.
func scanText(scans map[string]int64) string {
	keys := slices.Collect(maps.Keys(scans))
	slices.SortFunc(keys, func(a, b string) int {
		if scans[a] != scans[b] {
			return int(scans[b] - scans[a])
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, scans[k]))
	}
	return strings.Join(parts, ", ")
}
