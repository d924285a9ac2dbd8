package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/lib/pq"
)

// preparedQueries are the statements every event runs. On a pool opened
// with PoolSettings.Prepared, each connection prepares each of them the
// first time it runs it there and keeps it for the connection's life:
// PostgreSQL parses it once per connection and stops planning it once it
// settles on a generic plan (after five calls), and lib/pq runs it in one
// round trip instead of two (a statement with parameters sent as text is
// parsed and described first). Planning was about a quarter of
// PostgreSQL's CPU per re-check-in (docs/profiles.md, "PostgreSQL's
// share"). Their result columns are cast, so a migration that changes a
// column's type does not change the types a prepared statement returns.
var preparedQueries = map[string]bool{
	checkUpload:       true,
	lockHostQuery:     true,
	insertSystem:      true,
	updateNewerSystem: true,
	selectPackageIDs:  true,
}

// preparingConnector opens lib/pq connections that keep preparedQueries
// prepared. The rest of the store does not see it: a query on a *sql.Conn
// or in a *sql.Tx reaches the connection as text and runs prepared if it is
// one of them, so the store keeps a worker's connection pinned (and given
// back before its admission) as it does unprepared.
//
// A statement is never closed by the listener: the server drops a
// session's statements when the session ends, so closing a connection
// costs no round trip (lib/pq waits without a deadline for the server to
// acknowledge a statement's close).
type preparingConnector struct {
	*pq.Connector
	queries map[string]bool // preparedQueries, or a test's
}

func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := dc.(pqConn)
	if !ok { // not lib/pq's connection as known: run it as it is
		return dc, nil
	}
	return &preparingConn{pqConn: pc, queries: c.queries, stmts: map[string]driver.Stmt{}}, nil
}

// pqConn is what database/sql asks of a lib/pq connection, all forwarded.
type pqConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// preparingConn is one connection and its prepared statements. database/sql
// hands a connection to one goroutine at a time, so it needs no lock.
type preparingConn struct {
	pqConn
	queries map[string]bool
	stmts   map[string]driver.Stmt // by query text
	// stale is set when one of its statements no longer matches the
	// schema: the connection is then discarded rather than given out again.
	stale bool
}

// stmt returns query's prepared statement on this connection, preparing it
// the first time; nil when query is not one to prepare.
func (c *preparingConn) stmt(ctx context.Context, query string) (driver.Stmt, error) {
	if !c.queries[query] {
		return nil, nil
	}
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := c.pqConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil || st == nil {
		if err != nil {
			return nil, err
		}
		return c.pqConn.QueryContext(ctx, query, args)
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
	return rows, c.checkStale(query, err)
}

func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil || st == nil {
		if err != nil {
			return nil, err
		}
		return c.pqConn.ExecContext(ctx, query, args)
	}
	res, err := st.(driver.StmtExecContext).ExecContext(ctx, args)
	return res, c.checkStale(query, err)
}

// checkStale turns the server's refusal of a prepared statement that no
// longer fits the schema (a result type changed, the statement gone) into
// driver.ErrBadConn, which the server raises before the statement does
// anything: database/sql then discards the connection, and the caller's
// retry runs on one that prepares afresh. Other errors pass unchanged.
func (c *preparingConn) checkStale(query string, err error) error {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return err
	}
	switch pqErr.Code {
	case "0A000", // feature_not_supported: "cached plan must not change result type"
		"26000": // invalid_sql_statement_name: the prepared statement does not exist
	default:
		return err
	}
	delete(c.stmts, query)
	c.stale = true
	// The server's error is kept as text: wrapped, its SQLSTATE would
	// classify the error as the record's, not as the connection's.
	return fmt.Errorf("%w: a prepared statement no longer fits the schema: %v", driver.ErrBadConn, err)
}

func (c *preparingConn) ResetSession(ctx context.Context) error {
	if c.stale {
		return driver.ErrBadConn
	}
	return c.pqConn.ResetSession(ctx)
}

func (c *preparingConn) IsValid() bool { return !c.stale && c.pqConn.IsValid() }
