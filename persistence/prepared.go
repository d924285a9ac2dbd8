package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// prepared are the statements every event runs. Prepared (PoolSettings.
// Prepared), database/sql prepares each on a pooled connection the first
// time it runs there and keeps it for the connection's life: PostgreSQL
// parses it once per connection and stops planning it once it settles on
// a generic plan (after five calls), and lib/pq runs it in one round trip
// instead of two (an unnamed statement with parameters is parsed and
// described first). Planning was about a quarter of PostgreSQL's CPU per
// re-check-in (docs/profiles.md, "PostgreSQL's share"). Unprepared, each
// runs as text, as behind a PgBouncer in transaction mode before 1.21,
// which cannot keep a session's statements.
type prepared struct {
	db                         *sql.DB
	check, insert, updateNewer *sql.Stmt // nil: unprepared
}

func prepare(ctx context.Context, db *sql.DB, on bool) (*prepared, error) {
	p := &prepared{db: db}
	if !on {
		return p, nil
	}
	var err error
	for _, s := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&p.check, checkUpload}, {&p.insert, insertSystem}, {&p.updateNewer, updateNewerSystem}} {
		if *s.stmt, err = db.PrepareContext(ctx, s.query); err != nil {
			return nil, errors.Join(fmt.Errorf("prepare statements: %w", err), p.close())
		}
	}
	return p, nil
}

// queryRow runs stmt (query when unprepared) on the pool, or in tx when tx
// is not nil.
func (p *prepared) queryRow(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt, query string, args ...any) *sql.Row {
	switch {
	case stmt != nil && tx != nil:
		return tx.StmtContext(ctx, stmt).QueryRowContext(ctx, args...)
	case stmt != nil:
		return stmt.QueryRowContext(ctx, args...)
	case tx != nil:
		return tx.QueryRowContext(ctx, query, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

func (p *prepared) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{p.check, p.insert, p.updateNewer} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
