package persistence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/patchflow/patchflow/internal/redact"
)

// health is the Store's connection for health checks: a pool of its own,
// of one connection, opened from the store's URL. Readiness judges the
// database through it, so a check never waits behind the records that hold
// every connection of the main pool. It costs one more server connection.
// A connection the server dropped is replaced within the next check (see
// ping), so checks pass again as soon as the server is back; opening it
// ends with the check's context, as the pool's do (guardedConnector), so a
// handshake the server never answers does not hold the one connection.
type health struct {
	db *sql.DB
	// secrets are the URL's password in the forms an error text could
	// carry it (see secretsOf); Ping's errors have them replaced.
	secrets []string
}

func openHealth(ctx context.Context, dsn string, secrets []string, lifetime time.Duration) (*health, error) {
	db, err := openPool(dsn, 0, nil)
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

// ping returns by ctx's deadline, not the guard's cancelGrace after it: a
// check that has not answered by then has failed. A ping left waiting has
// its connection closed by the guard (guardedConn) cancelGrace later, so
// the next ping opens a fresh one rather than waiting for it.
//
// A connection the server dropped (a restart, a failover) fails its ping
// with driver.ErrBadConn and is discarded; the ping is asked again at once,
// on a new connection, so the answer is about the server, not the old
// connection.
func (h *health) ping(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		err := h.db.PingContext(ctx)
		if errors.Is(err, driver.ErrBadConn) {
			err = h.db.PingContext(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return h.redact(err)
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// redact returns err with the URL's password replaced by xxxxx, so a
// readiness reason or a log line never shows it; the causes stay in its
// chain.
func (h *health) redact(err error) error { return redact.Error(err, h.secrets) }
