package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/internal/redact"
)

// health is the Store's connection for health checks: a pool of its own,
// of one connection, opened from the store's URL. Readiness and the retry
// rule judge the database through it, so a check never waits behind the
// records that hold every connection of the main pool. It costs one more
// server connection.
// A connection the server dropped is replaced within the next check (see
// ping), so checks pass again as soon as the server is back; opening it
// ends with the check's context, as the pool's do (guardedConnector), so a
// handshake the server never answers does not hold the one connection. Its
// sessions get the pool's idle_in_transaction_session_timeout: a check
// holds its tables' write locks for its transaction, and a listener frozen
// in the middle of one must not keep a migration, and the records queued
// behind it, waiting.
type health struct {
	db *sql.DB
	// secrets are the URL's password in the forms an error text could
	// carry it (see secretsOf); Ping's errors have them replaced.
	secrets []string
}

func openHealth(ctx context.Context, dsn string, secrets []string, lifetime, idleInTransaction time.Duration) (*health, error) {
	db, err := openPool(dsn, idleInTransaction, nil)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("database url: %w", err), secrets)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(lifetime)
	h := &health{db: db, secrets: secrets}
	// Connect now, before the workload fills the server's connection slots.
	if err := h.ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to database (health check): %w", err)
	}
	return h, nil
}

// checkTimeoutWithoutDeadline is the time a check called without a
// deadline gets: its statement timeout is taken from the deadline.
const checkTimeoutWithoutDeadline = 5 * time.Second

// ping runs check and returns by ctx's deadline, not the guard's
// cancelGrace after it: a check that has not answered by then has failed.
// A check left waiting has its connection closed by the guard
// (guardedConn) cancelGrace later, so the next one opens a fresh one
// rather than waiting for it.
//
// A check that got no answer from the server (a connection the server
// dropped: a restart, a failover) is asked again at once, on a new
// connection, so the answer is about the server, not the old connection.
// A server's refusal is its answer.
func (h *health) ping(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, checkTimeoutWithoutDeadline)
		defer cancel()
	}
	run := new(checkRun)
	done := make(chan error, 1)
	go func() {
		err := h.check(ctx, run)
		if err != nil && codeOf(err) == "" && ctx.Err() == nil {
			err = h.check(ctx, run)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return h.redact(err)
	case <-ctx.Done():
		return fmt.Errorf("no answer (health check: %s): %w", run.step(), ctx.Err())
	}
}

// checkRun is where a check is: ping names the step of a check that has not
// answered by its deadline (connecting: the network or the server's
// handshake; committing the heartbeat: commits that cannot complete), and
// check names the step of an error.
type checkRun struct{ at atomic.Pointer[string] }

func (r *checkRun) enter(step string) { r.at.Store(&step) }

func (r *checkRun) step() string {
	if at := r.at.Load(); at != nil {
		return *at
	}
	return "starting"
}

// fail returns err, the current step's, named for it.
func (r *checkRun) fail(err error) error { return fmt.Errorf("health check: %s: %w", r.step(), err) }

// check is the database health check (Store.Ping): what the records need
// of the database, done the way they do it, on its own connection.
//
//  1. In one transaction, rolled back, under a statement_timeout of four
//     fifths of the time to ctx's deadline (so that a statement held by a
//     lock or a slow server fails with the server's own error, 57014,
//     before the deadline): a read of system by an inventory id no host
//     has, with the records' own query (checkUpload: an index lookup of
//     system, and of deleted_system); then an insert of a canary account
//     and of a canary system row, with the records' own insert
//     (systemWrite.insert). An ACCESS EXCLUSIVE lock on system (a
//     migration's ALTER TABLE, LOCK TABLE) stops the read, a SHARE lock
//     (CREATE INDEX without CONCURRENTLY) the insert. A standby (a failover
//     gone wrong) refuses the transaction: lib/pq begins every transaction
//     READ WRITE, the records' too. The timeout is the transaction's own:
//     a session setting would outlive the check and, behind a pooler in
//     transaction mode, reach other clients' transactions.
//  2. A one-row commit, in a statement of its own (heartbeat), as the
//     records' one-statement update is. It fails where that update does:
//     on a database made read-only by default_transaction_read_only (how a
//     failover may fence the old primary; 25006), which the transaction's
//     explicit READ WRITE overrides. And a rolled-back write never waits
//     for its WAL to be flushed, nor for a synchronous standby; the
//     records' commits do, and so does this one, so storage that cannot
//     make a commit durable (WAL writes failing or stalled, a synchronous
//     standby gone) fails the check by its deadline. It runs without a
//     statement timeout, which would not cover those waits (the server
//     stops the timer before it commits); what else it can wait for is
//     the row's lock, which another listener's heartbeat holds for one
//     statement. ctx bounds it all: ping returns by the deadline, lib/pq's
//     cancel request reaches a server that answers, and the guard closes
//     the connection to one that does not.
//
// What it cannot see. A full disk is seen only by a write that needs new
// space: a new WAL segment (the server stops with a PANIC, and every check
// fails until it is back) or a new page of a table or index (53100, for
// that statement). The check's canary insert needs one when system's pages
// are full: on a server whose 96 MB tmpfs was filled (20 systems stored),
// the records' inserts failed from the first after the disk filled, the
// check from its second run on, for all 300 runs of 30 s. But in a
// database whose pages have room, the canary finds it while records that
// need more (a new host's arrays, in TOAST and the GIN indexes) fail, and
// the check passes. Nor does it see
// trouble limited to what it does not touch: the package, package_name
// and advisory tables, the update path, one host's row locked, statements
// kept prepared (the check sends text), the main pool's connections
// (exhausted, or max_connections reached), or a server slower than the
// records' deadlines but inside the check's.
//
// Its cost per check: about a dozen round trips, two dead tuples (an
// account and a system row, with their index entries, for autovacuum), one
// id of system's bigserial sequence (the canary account's id is chosen
// among the negative ones the sequence never gives, so that checks do not
// use up the int account ids), and one small commit with its WAL flush.
func (h *health) check(ctx context.Context, run *checkRun) error {
	deadline, _ := ctx.Deadline()
	timeout := max(time.Until(deadline)*4/5, time.Millisecond)
	run.enter("connecting")
	conn, err := h.db.Conn(ctx)
	if err != nil {
		return err // as it is: it says what stopped the connection
	}
	defer conn.Close()
	if err := checkRecordsPath(ctx, conn, timeout, run); err != nil {
		return err
	}
	run.enter("committing the heartbeat")
	if _, err := conn.ExecContext(ctx, heartbeat); err != nil {
		return run.fail(err)
	}
	return nil
}

// setStatementTimeout sets the transaction's statement_timeout to $1 ms.
const setStatementTimeout = `SELECT set_config('statement_timeout', $1, true)`

// heartbeat commits the health_check row (migration 0003): one statement,
// so its row lock is held only while the server runs it, never across a
// round trip to a listener that could freeze holding it.
const heartbeat = `INSERT INTO health_check (id, checked_at) VALUES (true, now())
	ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`

// insertCanaryAccount inserts the canary account of a check, with its id
// given: the serial's sequence is not used up by checks.
const insertCanaryAccount = `INSERT INTO account (id, org_id) VALUES ($1, $2)`

// checkRecordsPath is check's step 1: the records' read and writes, in a
// transaction rolled back, its statements bounded by timeout.
func checkRecordsPath(ctx context.Context, conn *sql.Conn, timeout time.Duration, run *checkRun) error {
	c := newCanary()
	run.enter("beginning")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return run.fail(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after the Rollback below
	run.enter("setting the statement timeout")
	if _, err := tx.ExecContext(ctx, setStatementTimeout, strconv.FormatInt(timeout.Milliseconds(), 10)); err != nil {
		return run.fail(err)
	}
	var (
		deleted                   bool
		id                        sql.NullInt64
		lastEvent, lastEvaluation sql.NullTime
		serverStarted             time.Time
	)
	run.enter("reading system")
	if err := tx.QueryRowContext(ctx, checkUpload, c.upload.OrgID, c.upload.InventoryID).Scan(
		&deleted, &id, &lastEvent, &lastEvaluation, &serverStarted); err != nil {
		return run.fail(err)
	}
	run.enter("writing account")
	if _, err := tx.ExecContext(ctx, insertCanaryAccount, c.accountID, c.upload.OrgID); err != nil {
		return run.fail(err)
	}
	run.enter("writing system")
	w := systemWrite{accountID: c.accountID, u: &c.upload, sum: c.upload.checksum(), pkgIDs: []int64{}}
	if _, err := w.insert(ctx, tx); err != nil {
		return run.fail(err)
	}
	run.enter("rolling the canary rows back")
	if err := tx.Rollback(); err != nil {
		return run.fail(err)
	}
	return nil
}

// canary is a check's host: an account id below the ones the sequence gives,
// and an org and inventory id no event carries. They are drawn anew for each
// check, so two listeners' checks never wait for each other's unique keys.
type canary struct {
	accountID int
	upload    SystemUpload
}

func newCanary() canary {
	hi, lo := rand.Uint64(), rand.Uint64()
	hi = hi&^0xf000 | 0x4000     // version 4
	lo = lo&^(0xc<<60) | 0x8<<60 // variant 10
	host := fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", hi>>32, hi>>16&0xffff, hi&0xffff, lo>>48, lo&0xffffffffffff)
	now := time.Now()
	u := SystemUpload{OrgID: "patchflow-health-check-" + strconv.FormatUint(rand.Uint64(), 36), InventoryID: host,
		EventTime: now, LastUpload: now}
	u.canonicalize() // as the records' uploads are before they are written
	return canary{accountID: -1 - rand.IntN(math.MaxInt32), upload: u}
}

// redact returns err with the URL's password replaced by xxxxx, so a
// readiness reason or a log line never shows it; the causes stay in its
// chain.
func (h *health) redact(err error) error { return redact.Error(err, h.secrets) }
