package persistence

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// Migration 5 has the outbox compress its payloads with lz4 where the
// server has it, keeps the messages written before it readable, and its
// down migration gives the column back its server's default.
func TestMigrationToLZ4KeepsTheOutboxReadable(t *testing.T) {
	db, err := sql.Open("postgres", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	to := migrateStep(t, db)
	compression := func() string {
		t.Helper()
		var c string
		if err := db.QueryRow(`SELECT attcompression::text FROM pg_attribute WHERE attrelid = 'outbox'::regclass AND attname = 'payload'`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var lz4 bool
	if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))`).Scan(&lz4); err != nil {
		t.Fatal(err)
	}
	// a remediation's size, compressible: stored compressed, out of line
	payload := `{"host_id":"h","issues":["` + strings.Repeat(`patch:kernel-0:5.14.0-70.el9.x86_64","`, 400) + `x"]}`
	insert := func(key string) {
		t.Helper()
		if _, err := db.Exec(`INSERT INTO outbox (kind, ordering_key, message_key, payload) VALUES ('remediation', $1, $1, $2)`, key, payload); err != nil {
			t.Fatal(err)
		}
	}
	method := func(key string) string {
		t.Helper()
		var m sql.NullString
		if err := db.QueryRow(`SELECT pg_column_compression(payload) FROM outbox WHERE ordering_key = $1`, key).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m.String
	}
	to(4)
	insert("before")
	to(5)
	insert("after")
	want := "pglz"
	if lz4 {
		want = "lz4"
		if c := compression(); c != "l" {
			t.Fatalf("payload's compression after migration 5: %q, want lz4 (l)", c)
		}
	}
	if m := method("after"); m != want {
		t.Errorf("a payload written after migration 5 compressed with %q, want %s", m, want)
	}
	if m := method("before"); m != "pglz" {
		t.Errorf("a payload written before migration 5 compressed with %q, want pglz (kept)", m)
	}
	for _, key := range []string{"before", "after"} {
		var got string
		if err := db.QueryRow(`SELECT payload FROM outbox WHERE ordering_key = $1`, key).Scan(&got); err != nil || got != payload {
			t.Fatalf("payload written %s migration 5 read back wrong (%d bytes, err %v)", key, len(got), err)
		}
	}
	to(4)
	if c := compression(); c != "" {
		t.Errorf("payload's compression after migrating down: %q, want the default (empty)", c)
	}
}
