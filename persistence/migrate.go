package persistence

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate brings the schema of db up to the latest version. Several
// listeners starting at once are safe: golang-migrate takes an advisory lock
// (pg_advisory_lock) around reading the version and applying what is
// missing, so one of them applies the migrations and the others find them
// applied (TestReplicasStartingTogetherMigrateOnce). It runs on one
// connection of db that it gives back when done (postgres.WithInstance
// would keep one for good, and closing its driver would close db).
func Migrate(db *sql.DB) error {
	_, err := migrateUp(db)
	return err
}

// Schema is what a start found of the database's schema.
type Schema struct {
	// Version is the schema's version after the start's migration.
	Version uint
	// Applied says this start applied migrations; false when the schema
	// was already at Version (an earlier start, or another replica
	// starting at the same time, had applied them).
	Applied bool
}

// migrateUp is Migrate, saying what it did.
func migrateUp(db *sql.DB) (Schema, error) {
	var s Schema
	err := migrateWith(db, func(m *migrate.Migrate) error {
		if v, dirty, err := m.Version(); err == nil && !dirty {
			if latest := latestVersion(); v > latest {
				return fmt.Errorf("the database's schema is at version %d, newer than this build's %d: "+
					"a later release migrated it; run that release (or later), or migrate it down with that release's files", v, latest)
			}
		}
		err := m.Up()
		s.Applied = err == nil
		if err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return err
		}
		v, _, verr := m.Version()
		if verr != nil {
			return verr
		}
		s.Version = v
		return nil
	})
	return s, err
}

// migrateWith runs step (Up, or a move to one version in tests) on a
// migrate instance over one connection of db.
func migrateWith(db *sql.DB, step func(*migrate.Migrate) error) error {
	src, err := iofs.New(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer conn.Close()
	driver, err := postgres.WithConnection(ctx, conn, &postgres.Config{MigrationsTable: "schema_migrations"})
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "postgres", driver)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := step(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// latestVersion is the highest migration version this build embeds.
func latestVersion() uint {
	var latest uint
	names, _ := fs.Glob(migrations, "migrations/*.up.sql")
	for _, n := range names {
		var v uint
		if _, err := fmt.Sscanf(path.Base(n), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}
