package persistence

import (
	"database/sql"
	"errors"

	"github.com/golang-migrate/migrate/v4"
)

// MigrateTo moves the schema of db to version, up or down, with the same
// embedded migrations as Migrate. The listener only ever calls Migrate;
// this is for benchmarks and tests that start from an older schema.
func MigrateTo(db *sql.DB, version uint) error {
	return migrateWith(db, func(m *migrate.Migrate) error { return m.Migrate(version) })
}

// SchemaVersion returns the version of db's schema (0 before any
// migration) and whether the last migration stopped midway (dirty).
func SchemaVersion(db *sql.DB) (version uint, dirty bool, err error) {
	err = migrateWith(db, func(m *migrate.Migrate) error {
		var err error
		version, dirty, err = m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			return nil
		}
		return err
	})
	return version, dirty, err
}
