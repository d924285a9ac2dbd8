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
	connector, err := pq.NewConnector(url)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, q := range queries {
		set[q] = true
	}
	db := sql.OpenDB(preparingConnector{connector, set})
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
