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
	costs, wal, ok, err := w.read(ctx, 20) // 40 inserts over 20 "events"
	if err != nil || !ok {
		t.Fatalf("read: ok %v, %v", ok, err)
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
