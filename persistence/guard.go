package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"sync"
	"time"
)

// cancelGrace is how long a call whose context ended is left to the
// server before its connection is closed under it.
//
// When a call's context ends, lib/pq sends the server a cancel request,
// on a connection of its own, and waits for the statement's answer. A
// server that answers gets the request within milliseconds (a few round
// trips: the TCP and TLS handshakes and the request), stops the statement
// there (SQLSTATE 57014) and the call returns with it. A server that has
// stopped answering (its host frozen, its packets dropped) never gets the
// request nor sends the answer, and lib/pq would wait on the socket for as
// long as the kernel keeps it, with the call, its connection and its
// admission. The guard (guardedConn) closes the socket cancelGrace after
// the context ended, so every call returns by its deadline plus about
// cancelGrace, and that connection is never used again.
//
// The cancel request's own connection lives at most cancelGrace too
// (dialer): a prepared statement's call waits for its cancel request to
// end, and the request needs no longer from a server that serves.
const cancelGrace = 500 * time.Millisecond

// guardedConnector opens connections whose every call ends by its
// context's end plus cancelGrace, whether the server answers or not (see
// guardedConn); its handshake ends by its context's end. It wraps the
// pool's connector: lib/pq's, or the preparing one over it, whose lib/pq
// connector dials through dialer, which hands each session's socket over.
type guardedConnector struct{ driver.Connector }

func (c guardedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	sock := new(socket)
	// A handshake has nothing to cancel at the server: its socket is
	// closed as soon as its context ends.
	w := sock.watch(ctx, 0)
	dc, err := c.Connector.Connect(context.WithValue(ctx, socketKey{}, sock))
	if err = w.end(err); err != nil {
		return nil, err
	}
	if lost := sock.lost(); lost != nil { // cut as the handshake ended
		dc.Close()
		return nil, fmt.Errorf("%w: %w", driver.ErrBadConn, lost)
	}
	pc, ok := dc.(pqConn)
	if !ok || !sock.dialed() { // not lib/pq's connection, or not dialed by dialer: run it as it is
		return dc, nil
	}
	return &guardedConn{pqConn: pc, sock: sock}, nil
}

// socketKey marks the context of a session's handshake: dialer hands the
// connection it dials under it to the socket it holds.
type socketKey struct{}

// socket is the network connection of one session, the one the guard
// closes. lib/pq reads and writes it (through TLS when sslmode asks)
// without deadlines once the session is open.
type socket struct {
	mu   sync.Mutex
	conn net.Conn // the latest dialed for the session
	why  error    // why it was closed; nil while open
}

// use makes c the session's connection; an error (c is not to be used)
// when the session was cut already.
func (s *socket) use(c net.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != nil {
		return s.why
	}
	s.conn = c
	return nil
}

func (s *socket) dialed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil
}

// cut closes the connection for why, once.
func (s *socket) cut(why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != nil {
		return
	}
	s.why = why
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// lost is why the connection was closed; nil while it is open.
func (s *socket) lost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// explain returns err, a call's error, as the lost connection it is when
// the socket was cut: driver.ErrBadConn (transient, see classify; a
// connection database/sql discards), with the reason and the context's
// error (a cancellation stays one) in its chain.
func (s *socket) explain(err error) error {
	if err == nil {
		return nil
	}
	why := s.lost()
	if why == nil {
		return err
	}
	if errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%w: %w", why, err)
	}
	return fmt.Errorf("%w: %w: %w", driver.ErrBadConn, why, err)
}

// watch closes s's connection grace after ctx ends, unless end comes
// first. It costs no goroutine while ctx lives.
func (s *socket) watch(ctx context.Context, grace time.Duration) *watch {
	w := &watch{sock: s}
	if ctx.Done() == nil {
		return w
	}
	cut := func() {
		if grace <= 0 {
			s.cut(fmt.Errorf("the connection's handshake outlived its context (%w); its connection was closed", context.Cause(ctx)))
			return
		}
		s.cut(fmt.Errorf("no answer from the server %s after the call's context ended (%w); its connection was closed", grace, context.Cause(ctx)))
	}
	w.stop = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.over {
			return
		}
		if grace <= 0 {
			cut()
			return
		}
		w.timer = time.AfterFunc(grace, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.over {
				cut()
			}
		})
	})
	return w
}

// watch is one call's guard on its connection (socket.watch).
type watch struct {
	sock  *socket
	stop  func() bool // nil: the context never ends
	mu    sync.Mutex
	over  bool        // the call has returned: the watch closes nothing
	timer *time.Timer // the grace running, once the context ended
}

// end ends the watch (once it returns, the watch closes nothing) and
// returns err, the call's error, explained (socket.explain).
func (w *watch) end(err error) error {
	if w.stop != nil {
		w.stop()
		w.mu.Lock()
		w.over = true
		if w.timer != nil {
			w.timer.Stop()
		}
		w.mu.Unlock()
	}
	return w.sock.explain(err)
}

// guardedConn is a pool connection whose calls cannot outlive their
// context by more than cancelGrace: each call that waits on the server
// (statements, with their rows until closed; a transaction from its BEGIN
// to its end; pings; prepares) is watched, and when its context ends and
// the server has not answered cancelGrace later, the connection's socket is
// closed under it. The call then fails as a lost connection
// (driver.ErrBadConn: transient), and the connection reports itself bad,
// so database/sql discards it, never giving it out again. A server that
// answers is unaffected: lib/pq's cancel request stops its statement
// first. The watch costs an AfterFunc registration per call, no goroutine.
type guardedConn struct {
	pqConn // the preparing connection, or lib/pq's
	sock   *socket
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	w := c.sock.watch(ctx, cancelGrace)
	rows, err := c.pqConn.QueryContext(ctx, query, args)
	if err != nil {
		return nil, w.end(err)
	}
	return &guardedRows{Rows: rows, w: w}, nil // watched until closed: Next reads the server
}

func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	w := c.sock.watch(ctx, cancelGrace)
	res, err := c.pqConn.ExecContext(ctx, query, args)
	return res, w.end(err)
}

func (c *guardedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	w := c.sock.watch(ctx, cancelGrace)
	st, err := c.pqConn.PrepareContext(ctx, query)
	if err = w.end(err); err != nil {
		return nil, err
	}
	if ps, ok := st.(pqStmt); ok {
		return guardedStmt{pqStmt: ps, sock: c.sock}, nil
	}
	return st, nil
}

// BeginTx watches the transaction from its BEGIN until its COMMIT or
// ROLLBACK returns: neither takes a context, and database/sql rolls a
// transaction back when its context ends.
func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	w := c.sock.watch(ctx, cancelGrace)
	tx, err := c.pqConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, w.end(err)
	}
	return guardedTx{Tx: tx, w: w}, nil
}

func (c *guardedConn) Ping(ctx context.Context) error {
	w := c.sock.watch(ctx, cancelGrace)
	return w.end(c.pqConn.Ping(ctx))
}

// ResetSession refuses a connection whose socket was closed, so that
// database/sql opens another instead of handing it out.
func (c *guardedConn) ResetSession(ctx context.Context) error {
	if c.sock.lost() != nil {
		return driver.ErrBadConn
	}
	return c.pqConn.ResetSession(ctx)
}

func (c *guardedConn) IsValid() bool { return c.sock.lost() == nil && c.pqConn.IsValid() }

type guardedTx struct {
	driver.Tx
	w *watch
}

func (t guardedTx) Commit() error   { return t.w.end(t.Tx.Commit()) }
func (t guardedTx) Rollback() error { return t.w.end(t.Tx.Rollback()) }

// pqStmt is what lib/pq's prepared statement implements.
type pqStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// guardedStmt is a statement prepared through database/sql (the store
// prepares its own below it, see preparedQueries), its calls watched as
// the connection's are.
type guardedStmt struct {
	pqStmt
	sock *socket
}

func (s guardedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	w := s.sock.watch(ctx, cancelGrace)
	res, err := s.pqStmt.ExecContext(ctx, args)
	return res, w.end(err)
}

func (s guardedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	w := s.sock.watch(ctx, cancelGrace)
	rows, err := s.pqStmt.QueryContext(ctx, args)
	if err != nil {
		return nil, w.end(err)
	}
	return &guardedRows{Rows: rows, w: w}, nil
}

// guardedRows are a query's rows, its watch held until they are closed
// (closing rows not read to their end reads the rest). The optional
// interfaces lib/pq's rows implement are passed on, with database/sql's
// own defaults for rows that lack them.
type guardedRows struct {
	driver.Rows
	w *watch
}

func (r *guardedRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == io.EOF {
		return err
	}
	return r.w.sock.explain(err)
}

func (r *guardedRows) Close() error { return r.w.end(r.Rows.Close()) }

func (r *guardedRows) HasNextResultSet() bool {
	if n, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

func (r *guardedRows) NextResultSet() error {
	if n, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return r.w.sock.explain(n.NextResultSet())
	}
	return io.EOF
}

func (r *guardedRows) ColumnTypeScanType(i int) reflect.Type {
	if c, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return c.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *guardedRows) ColumnTypeDatabaseTypeName(i int) string {
	if c, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return c.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *guardedRows) ColumnTypeLength(i int) (int64, bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return c.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *guardedRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return c.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
