package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

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
	// The effects' statement, once per event with the effects on: its
	// planning was 0.37 ms of PostgreSQL's CPU per event (pg_stat_statements,
	// docs/benchmarks.md scenario 11's run), about a tenth of its cost.
	writeEffects:         true,
	writeEffectsNoNotify: true,
	// With the upload's write: the statement an event with effects runs
	// instead of insertSystem or updateNewerSystem.
	insertSystemWithEffects:              true,
	insertSystemWithEffectsNoNotify:      true,
	updateNewerSystemWithEffects:         true,
	updateNewerSystemWithEffectsNoNotify: true,
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
//
// Prepared statements need a session of their own: behind a pooler in
// transaction mode that does not track them (PgBouncer before 1.21, or
// with max_prepared_statements = 0), lib/pq's statement names ("1", "2",
// ...) would meet another connection's statements of the same name, and a
// call could run another statement with its arguments. The pool must then
// be opened unprepared (DB_PREPARED_STATEMENTS=false). What the connector
// sees of such a pooler (a statement gone, a name taken) switches it to
// text, but a name taken by a statement that accepts the arguments is not
// seen: the switch is a net, not a detection.
type preparingConnector struct {
	*pq.Connector
	queries map[string]bool // preparedQueries, or a test's
	// text is set once a session is seen to lose its statements or to
	// share their names with another client; every connection sends text
	// from then on.
	text *atomic.Bool
}

func newPreparingConnector(c *pq.Connector, queries map[string]bool) preparingConnector {
	return preparingConnector{Connector: c, queries: queries, text: new(atomic.Bool)}
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
	return &preparingConn{pqConn: pc, queries: c.queries, text: c.text, stmts: map[string]driver.Stmt{}}, nil
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
	text    *atomic.Bool
	stmts   map[string]driver.Stmt // by query text
	// stale is set when the server refused one of its statements: the
	// connection is then discarded rather than given out again.
	stale bool
	inTx  bool // a transaction begun by BeginTx has not ended
}

// stmt returns query's prepared statement on this connection, preparing it
// the first time (fresh); nil when query is to be sent as text: not one to
// prepare, the pool switched to text, or the connection stale (until it is
// discarded, so that a statement refused call after call is not prepared
// again on every call).
func (c *preparingConn) stmt(ctx context.Context, query string) (st driver.Stmt, fresh bool, err error) {
	if !c.queries[query] || c.text.Load() || c.stale {
		return nil, false, nil
	}
	if st, ok := c.stmts[query]; ok {
		return st, false, nil
	}
	st, err = c.pqConn.PrepareContext(ctx, query)
	if err != nil {
		if codeOf(err) == "42P05" { // duplicate_prepared_statement: another client's, on a shared session
			return nil, false, c.sendText(err)
		}
		return nil, false, err
	}
	c.stmts[query] = st
	return st, true, nil
}

func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, fresh, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
	again, err := c.outcome(query, fresh, err)
	if again {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	return rows, err
}

func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, fresh, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	res, err := st.(driver.StmtExecContext).ExecContext(ctx, args)
	again, err := c.outcome(query, fresh, err)
	if again {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	return res, err
}

// BeginTx notes that a transaction is open until its end: a statement
// refused there cannot be sent again as text (see outcome).
func (c *preparingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.pqConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return txEnd{Tx: tx, c: c}, nil
}

// txEnd is a transaction that tells its connection when it ends.
type txEnd struct {
	driver.Tx
	c *preparingConn
}

func (t txEnd) Commit() error {
	t.c.inTx = false
	return t.Tx.Commit()
}

func (t txEnd) Rollback() error {
	t.c.inTx = false
	return t.Tx.Rollback()
}

// outcome is err, the result of running query's prepared statement
// (prepared by this very call when fresh), as the caller should see it;
// again when the call is to be sent as text instead, on this connection.
//
// The server refuses a prepared statement that no longer fits the schema
// before running it: a migration changed the type of a column it returns
// (0A000, "cached plan must not change result type") or one a parameter's
// type was inferred from, or dropped what it names (class 42, raised as
// the server analyses it again with the parameter types fixed when it was
// prepared). The connection is then discarded when given back, with its
// statements (never closed one by one, so none piles up on the server).
//
//   - A statement prepared earlier comes back as driver.ErrBadConn, a
//     transient error: the caller's retry prepares afresh, as text would
//     be parsed afresh.
//   - A statement prepared by this call, outside a transaction, is sent
//     again as text (again): nothing ran, and text decides whose the error
//     is (a migration may have committed between the prepare and the run;
//     a statement broken for good fails as text, and is dead-lettered
//     rather than retried forever).
//   - Inside a transaction, which the refusal aborted, the error comes
//     back as it is: a migration cannot commit between a prepare and its
//     run there (the prepare holds its locks until the transaction ends),
//     so the refusal is the statement's own.
//
// A session that has lost its statements (26000) is behind a pooler in
// transaction mode: the whole pool sends text from then on.
func (c *preparingConn) outcome(query string, fresh bool, err error) (again bool, _ error) {
	if err == nil {
		return false, nil
	}
	code := codeOf(err)
	switch {
	case code == "26000": // invalid_sql_statement_name: the statement is gone
		return false, c.sendText(err)
	case code == "0A000" || strings.HasPrefix(code, "42"):
		delete(c.stmts, query)
		c.stale = true
		switch {
		case fresh && !c.inTx:
			return true, nil
		case fresh:
			return false, err
		}
		// The server's error is kept as text: wrapped, its SQLSTATE would
		// classify the error as the record's, not as the connection's.
		return false, fmt.Errorf("%w: a prepared statement no longer fits the schema: %v", driver.ErrBadConn, err)
	}
	return false, err
}

// sendText switches the pool to text for good, after err showed a pooler
// sharing sessions, and returns err as the connection's (transient): the
// caller's retry then runs as text.
func (c *preparingConn) sendText(err error) error {
	c.text.Store(true)
	c.stale = true
	return fmt.Errorf("%w: the server's sessions are shared (a pooler in transaction mode?); sending statements as text from now on: %v", driver.ErrBadConn, err)
}

// codeOf is err's SQLSTATE; "" when it is not the server's.
func codeOf(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code)
	}
	return ""
}

func (c *preparingConn) ResetSession(ctx context.Context) error {
	if c.stale {
		return driver.ErrBadConn
	}
	return c.pqConn.ResetSession(ctx)
}

func (c *preparingConn) IsValid() bool { return !c.stale && c.pqConn.IsValid() }
