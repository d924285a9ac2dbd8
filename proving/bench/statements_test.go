package bench

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// The window counts what ran in its database after it opened, per event,
// and leaves out what ran before it and its own queries.
func TestStatementWindowCountsPerEvent(t *testing.T) {
	url := pgtest.URL(t) // skips, or fails, without a server
	ctx := context.Background()
	db := openDB(t, url)
	if _, err := db.ExecContext(ctx, `CREATE TABLE stmt_probe (id int PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	insert := func(db *sql.DB, from, to int) {
		for i := from; i < to; i++ {
			if _, err := db.ExecContext(ctx, `INSERT INTO stmt_probe (id, v) VALUES ($1, repeat('x', 100))`, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(db, 0, 7) // before the window: not counted
	w, err := startStatements(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if w.lsn == "" {
		t.Fatal("the server has no pg_stat_statements preloaded: .ci/postgres preloads it")
	}
	insert(db, 7, 47)
	costs, wal, err := w.read(ctx, 20) // 40 inserts over 20 "events"
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var found bool
	for _, c := range costs {
		if strings.Contains(c.Query, "pg_stat_statements") || strings.Contains(c.Query, "pg_current_wal_lsn") {
			t.Errorf("the window counted its own query: %q", c.Query)
		}
		if strings.HasPrefix(c.Query, "INSERT INTO stmt_probe") {
			found = true
			if c.Calls != 2 || c.Rows != 2 {
				t.Errorf("insert: %.2f calls and %.2f rows per event, want 2 and 2 (40 over 20 events)", c.Calls, c.Rows)
			}
			if c.WALBytes <= 0 || c.ExecMS <= 0 {
				t.Errorf("insert: WAL %.0f bytes, exec %.3f ms per event; want both above 0", c.WALBytes, c.ExecMS)
			}
		}
	}
	if !found {
		t.Fatalf("no insert among %+v", costs)
	}
	if wal < 2*100 {
		t.Errorf("WAL per event %.0f bytes; two 100-byte rows each need more", wal)
	}
}

// The report shows the default configuration's statements, costliest as
// measured, escapes a statement's pipes, leaves out the ones that cost
// nothing, and shows no table for a run without them.
func TestStatementsTable(t *testing.T) {
	r := &Report{EndToEnd: []EndToEndResult{
		{EndToEndConfig: EndToEndConfig{Name: ConfigDefault, Workload: WorkloadNewHosts}, Listener: ListenerAfter,
			CPU: CPUPerEvent{Postgres: 2.5}, WALBytesPerEvent: 27000, Statements: []StatementCost{
				{Query: "UPDATE system SET a = b || c", Calls: 0.5, ExecMS: 1.2, PlanMS: 0.1, WALBytes: 11000},
				{Query: "BEGIN", Calls: 1, ExecMS: 0.001},
			}},
		{EndToEndConfig: EndToEndConfig{Name: "fixed G=32", Workload: WorkloadNewHosts}, Listener: ListenerAfter,
			Statements: []StatementCost{{Query: "SELECT other", ExecMS: 5}}},
	}}
	var b strings.Builder
	r.statementsTable(&b)
	md := b.String()
	for _, want := range []string{"### PostgreSQL by statement", "**after listener, new hosts**: 2.5 ms of PostgreSQL CPU and 27000 WAL bytes per event",
		"| `UPDATE system SET a = b \\|\\| c` | 0.50 | 1.200 | 0.100 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	for _, not := range []string{"BEGIN", "SELECT other"} {
		if strings.Contains(md, not) {
			t.Errorf("%q shown:\n%s", not, md)
		}
	}
	b.Reset()
	(&Report{EndToEnd: []EndToEndResult{{EndToEndConfig: EndToEndConfig{Name: ConfigDefault}}}}).statementsTable(&b)
	if b.Len() != 0 {
		t.Errorf("a table without statements:\n%s", b.String())
	}
}
