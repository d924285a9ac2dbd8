// Package pgtest gives each test a fresh PostgreSQL database on the server
// named by DATABASE_URL (make test starts a throwaway one). Without
// DATABASE_URL a test is skipped, unless PATCHFLOW_REQUIRE_DB=1 (set by make
// test and CI), where it fails: a database test must never pass by not running.
package pgtest

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"

	_ "github.com/lib/pq" // the "postgres" driver
)

// URL creates an empty database for t, dropped when t ends, and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		if os.Getenv("PATCHFLOW_REQUIRE_DB") == "1" {
			t.Fatal("DATABASE_URL is not set; run the tests through `make test`, which starts a throwaway PostgreSQL")
		}
		t.Skip("DATABASE_URL not set; `make test` starts a throwaway PostgreSQL")
	}
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("pf_test_%d", rand.Uint64())
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil { // name is generated, not input
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("postgres", base)
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
