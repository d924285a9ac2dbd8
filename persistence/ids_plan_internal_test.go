package persistence

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// Looking up and inserting an event's packages probes the indexes once a
// package: it never reads every stored package name, a cost that grows with
// the fleet while an event misses the cache for a few packages only.
func TestPackageStatementsProbeTheIndexes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.db.ExecContext(ctx, `
		INSERT INTO package_name (name) SELECT 'pkg-' || g FROM generate_series(1, 5000) g;
		INSERT INTO package (name_id, evra)
			SELECT n, '0:' || v || '.0-1.el8.x86_64' FROM generate_series(1, 5000) n, generate_series(1, 12) v;
		ANALYZE package_name; ANALYZE package`); err != nil {
		t.Fatal(err)
	}
	var names, evras []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("pkg-%d", 7*(i+1)))
		evras = append(evras, "0:3.0-1.el8.x86_64")
	}
	for what, query := range map[string]string{"look up": selectPackageIDs, "insert": insertPackagesQuery} {
		rows, err := s.db.QueryContext(ctx, "EXPLAIN "+query, pq.Array(names), pq.Array(evras))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "Seq Scan") || !strings.Contains(text, "package_name_name_key") {
			t.Errorf("%s scans instead of probing package_name's index:\n%s", what, text)
		}
	}
}
