package persistence_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// Three replicas started at the same moment against an empty database:
// each Open migrates, one of them applies every migration and the others
// find the schema current (golang-migrate's advisory lock holds them while
// the first applies), all three open, and the schema is clean at the latest
// version.
func TestReplicasStartingTogetherMigrateOnce(t *testing.T) {
	url := pgtest.URL(t)
	ups, err := fs.Glob(os.DirFS("migrations"), "*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("migrations: %v %v", ups, err)
	}
	latest := uint(len(ups)) // versions are numbered 1..n

	const replicas = 3
	var (
		start   = make(chan struct{})
		wg      sync.WaitGroup
		schemas [replicas]persistence.Schema
		errs    [replicas]error
	)
	for i := range replicas {
		wg.Go(func() {
			<-start
			s, err := persistence.Open(context.Background(), url, persistence.DefaultPoolSettings())
			if err != nil {
				errs[i] = err
				return
			}
			schemas[i] = s.Schema()
			s.Close()
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d failed to start: %v", i, errs[i])
		}
		if schemas[i].Version != latest {
			t.Errorf("replica %d saw schema version %d, want %d", i, schemas[i].Version, latest)
		}
		if schemas[i].Applied {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d replicas applied migrations, want exactly 1: %+v", applied, schemas)
	}
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	var dirty bool
	if err := db.QueryRow(`SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty); err != nil {
		t.Fatal(err)
	}
	if uint(version) != latest || dirty {
		t.Fatalf("schema_migrations at %d (dirty %v), want %d clean", version, dirty, latest)
	}
}

// A build that knows fewer migrations than the database has (an older
// replica restarted during or after a rollout) refuses to start with a
// sentence that says so, not golang-migrate's "no migration found".
func TestAnOlderBuildOnANewerSchemaSaysSo(t *testing.T) {
	url := pgtest.URL(t)
	s, err := persistence.Open(context.Background(), url, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE schema_migrations SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.Open(context.Background(), url, persistence.DefaultPoolSettings())
	if err == nil || !strings.Contains(err.Error(), "newer than this build's") {
		t.Fatalf("Open on a newer schema: %v, want an error saying the schema is newer than the build", err)
	}
}
