package persistence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// openPreparing opens a pool of one connection that keeps queries prepared.
func openPreparing(t *testing.T, url string, queries ...string) *sql.DB {
	t.Helper()
	set := map[string]bool{}
	for _, q := range queries {
		set[q] = true
	}
	db, err := openPool(url, 0, set)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// A prepared statement the server refuses after a migration (here one whose
// result type changed, as an uncast column's would) fails once, as a
// transient error of the connection, not of the record; that connection is
// discarded, and the next one prepares the statement afresh and works.
func TestAStalePreparedStatementCostsItsConnectionOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	const q = `SELECT x, pg_backend_pid() FROM t WHERE k = $1`
	db := openPreparing(t, url, q)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (k int, x int); INSERT INTO t VALUES (1, 42)`); err != nil {
		t.Fatal(err)
	}
	run := func() (int64, int, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var x int64
		var pid int
		err = conn.QueryRowContext(ctx, q, 1).Scan(&x, &pid)
		return x, pid, err
	}
	_, firstPID, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE t ALTER COLUMN x TYPE bigint`); err != nil {
		t.Fatal(err)
	}
	_, _, err = run()
	if !errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("the stale statement's error is %v, want driver.ErrBadConn", err)
	}
	if c := classify(err); messages.ClassOf(c) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("classified %v: %v, want transient", messages.ClassOf(c), c)
	}
	x, pid, err := run()
	if err != nil || x != 42 {
		t.Fatalf("after the stale statement: %d, %v; want 42 on a new connection", x, err)
	}
	if pid == firstPID {
		t.Fatalf("the connection with the stale statement (backend %d) was given out again", pid)
	}
}

// A prepared statement cancelled by its context's deadline (here waiting
// for a lock another session holds) returns by the deadline, and gives its
// connection back: the pool's only connection serves the next call.
func TestACancelledPreparedStatementGivesItsConnectionBack(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	db := openPreparing(t, url, lockHostQuery)
	holder, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // the test's end
	if _, err := tx.ExecContext(ctx, lockHostQuery, hostLockClass, "h"); err != nil {
		t.Fatal(err)
	}
	lock := func(ctx context.Context) error {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		defer tx.Rollback() //nolint:errcheck // a lock test
		_, err = tx.ExecContext(ctx, lockHostQuery, hostLockClass, "h")
		return err
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = lock(short)
	if err == nil {
		t.Fatal("took a lock another session holds")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the cancelled statement returned after %s", took)
	}
	if c := classify(err); messages.ClassOf(c) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("classified %v: %v, want transient", messages.ClassOf(c), c)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	next, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := lock(next); err != nil {
		t.Fatalf("the next call on the pool's one connection: %v", err)
	}
}

// A statement that fails the first time it runs on a connection fails as
// it would sent as text: the error is the statement's, not a transient
// one of the connection's, so a statement broken for good is dead-lettered
// rather than retried forever.
func TestAPreparedStatementsOwnErrorIsNotTheConnections(t *testing.T) {
	ctx := context.Background()
	const q = `SELECT x FROM missing WHERE k = $1`
	db := openPreparing(t, pgtest.URL(t), q)
	for range 2 {
		var x int
		err := db.QueryRowContext(ctx, q, 1).Scan(&x)
		var pqErr *pq.Error
		if !errors.As(err, &pqErr) || pqErr.Code != "42P01" || errors.Is(err, driver.ErrBadConn) {
			t.Fatalf("got %v, want the server's undefined_table (42P01)", err)
		}
	}
}

// A session that lost its prepared statements (26000: behind a pooler in
// transaction mode, which hands each transaction another server session)
// fails once, transiently; the whole pool then sends text, and works.
func TestASessionThatLosesItsStatementsSwitchesThePoolToText(t *testing.T) {
	ctx := context.Background()
	const q = `SELECT $1::int + 1`
	db := openPreparing(t, pgtest.URL(t), q)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, q, 1).Scan(&n); err != nil || n != 2 {
		t.Fatalf("first run: %d, %v", n, err)
	}
	if _, err := conn.ExecContext(ctx, `DEALLOCATE ALL`); err != nil {
		t.Fatal(err)
	}
	err = conn.QueryRowContext(ctx, q, 1).Scan(&n)
	if !errors.Is(err, driver.ErrBadConn) || messages.ClassOf(classify(err)) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("the lost statement: %v, want a transient driver.ErrBadConn", err)
	}
	conn.Close()
	for i := range 3 {
		var prepared int
		if err := db.QueryRowContext(ctx, q, i).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("as text, run %d: %d, %v", i, n, err)
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&prepared); err != nil || prepared != 0 {
			t.Fatalf("the session holds %d prepared statements (%v); after the switch, none is prepared", prepared, err)
		}
	}
}

// A statement whose first run on its connection failed for a reason of its
// own (a unique violation; a deadlock or a cancelled context alike) and a
// migration later changed a parameter's column type: the server refuses it
// (42804), and the call still succeeds as text would (database/sql's own
// retry of driver.ErrBadConn on *sql.DB; the store's *sql.Conn gets a
// transient error to retry).
func TestAStatementThatFailedItsFirstRunSurvivesAMigration(t *testing.T) {
	ctx := context.Background()
	const q = `INSERT INTO st (k, v) VALUES ($1, $2)`
	db := openPreparing(t, pgtest.URL(t), q)
	if _, err := db.ExecContext(ctx, `CREATE TABLE st (k int PRIMARY KEY, v text); INSERT INTO st VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, q, 1, "a"); codeOf(err) != "23505" {
		t.Fatalf("first run: %v, want a unique violation (23505)", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TYPE st_v AS ENUM ('a', 'b'); ALTER TABLE st ALTER COLUMN v TYPE st_v USING v::st_v`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, q, 2, "b"); err != nil {
		t.Fatalf("after the migration: %v, want the row stored (as text, or prepared afresh)", err)
	}
}

// A statement the server refuses on every call (here a cast to a table
// that does not exist; 42501 after a REVOKE alike) is not prepared again on
// every call of the connection it was refused on: the session keeps at
// most the one statement until the connection is discarded.
func TestRefusedStatementsDoNotPileUpOnTheServer(t *testing.T) {
	ctx := context.Background()
	const q = `SELECT $1::text::regclass::text`
	db := openPreparing(t, pgtest.URL(t), q)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 50 {
		var s string
		if err := conn.QueryRowContext(ctx, q, "no_such_table").Scan(&s); codeOf(err) != "42P01" {
			t.Fatalf("got %v, want the server's undefined_table (42P01)", err)
		}
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 1 {
		t.Fatalf("the session holds %d prepared statements after 50 refused calls of one query", n)
	}
}

// hookConn runs afterPrepare once its PrepareContext returned: a migration
// committing between the Parse of a fresh statement and its Bind.
type hookConn struct {
	pqConn
	afterPrepare func()
}

func (h hookConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := h.pqConn.PrepareContext(ctx, q)
	if err == nil && h.afterPrepare != nil {
		h.afterPrepare()
	}
	return st, err
}

type hookConnector struct {
	pc           preparingConnector
	afterPrepare func()
}

func (c hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.pc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &preparingConn{pqConn: hookConn{dc.(pqConn), c.afterPrepare}, queries: c.pc.queries, text: c.pc.text, stmts: map[string]driver.Stmt{}}, nil
}
func (c hookConnector) Driver() driver.Driver { return c.pc.Driver() }

// A migration that commits between a fresh statement's prepare and its run
// (a round trip apart; a *sql.Conn outside a transaction holds no lock
// between them) makes the server refuse the statement for the schema of a
// moment ago. The call is sent again as text, and stores the row.
func TestAMigrationBetweenAPrepareAndItsRunCostsNothing(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE TABLE st (k int PRIMARY KEY, v text); CREATE TYPE st_v AS ENUM ('a', 'b')`); err != nil {
		t.Fatal(err)
	}
	const q = `INSERT INTO st (k, v) VALUES ($1, $2)`
	pc, err := pq.NewConnector(url)
	if err != nil {
		t.Fatal(err)
	}
	migrated := false
	db := sql.OpenDB(hookConnector{pc: newPreparingConnector(pc, map[string]bool{q: true}), afterPrepare: func() {
		if migrated {
			return
		}
		migrated = true
		if _, err := admin.ExecContext(ctx, `ALTER TABLE st ALTER COLUMN v TYPE st_v USING v::st_v`); err != nil {
			t.Error(err)
		}
	}})
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, q, 1, "a")
	if err != nil {
		t.Fatalf("the record's insert, prepared just before a migration: %v (classified %v); text would have stored it",
			err, messages.ClassOf(classify(err)))
	}
}
