package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/internal/redact"
)

// PoolSettings size the connection pool.
type PoolSettings struct {
	MaxOpen     int           // connections open at most; bounds database concurrency
	MaxIdle     int           // connections kept idle
	MaxLifetime time.Duration // recycle connections after this long (0: never)
	// DeletedTTL is how long a deleted host is remembered, so late events
	// for it are ignored.
	DeletedTTL time.Duration
	// IDCacheSize is how many ids of packages (and of advisories, and of
	// accounts up to 100,000) the store keeps in memory; 0: DefaultIDCacheSize.
	IDCacheSize int
	// IdleInTransaction is the server's idle_in_transaction_session_timeout
	// for the pool's sessions (0: the server's own, off by default). A
	// listener paused mid-transaction (a stopped VM, a long GC) holds its
	// row and index locks while it sleeps, and every other listener's
	// writes to those rows wait behind it; the server ends such a session
	// after this long, so the rest of the fleet goes on. The listener's
	// own transactions never wait between statements: they run statements
	// back to back, VMaaS asked before the first.
	IdleInTransaction time.Duration
	// Prepared keeps the statements every event runs prepared on each
	// connection (see preparedQueries); off, each is sent as text to be
	// parsed and planned anew, as a PgBouncer in transaction mode before
	// 1.21 needs.
	Prepared bool
}

// DefaultPoolSettings suit one listener process.
func DefaultPoolSettings() PoolSettings {
	return PoolSettings{MaxOpen: 32, MaxIdle: 32, MaxLifetime: 30 * time.Minute, DeletedTTL: 24 * time.Hour, IDCacheSize: DefaultIDCacheSize,
		IdleInTransaction: DefaultIdleInTransaction, Prepared: true}
}

// DefaultIdleInTransaction is PoolSettings.IdleInTransaction's default:
// far above any pause between two statements of a running listener, and
// below the time a stalled fleet costs.
const DefaultIdleInTransaction = 5 * time.Second

// Store is the listener's view of the database. Safe for concurrent use.
// It holds the pool of PoolSettings.MaxOpen connections for the work, and
// one more connection, apart, for Ping.
type Store struct {
	db *sql.DB
	// admit gives the pool's connections out, the urgent work first.
	admit      *admission
	health     *health
	deletedTTL time.Duration
	ids        *idCache
	schema     Schema
	// url is what Open was given, for OpenOutbox's pool; never logged.
	url     string
	secrets []string
	// onOutbox is called after a commit that wrote effects (OnOutboxWrite).
	onOutbox atomic.Pointer[func()]
}

// Schema is what Open found of the schema and did to it.
func (s *Store) Schema() Schema { return s.schema }

// Open connects to url (a lib/pq connection URL or key=value string, as
// CheckURL accepts; TLS through sslmode and friends), checks the
// connection, applies migrations, opens the health-check connection and
// returns a Store. Its errors never contain the password.
func Open(ctx context.Context, url string, pool PoolSettings) (*Store, error) {
	if err := CheckURL(url); err != nil {
		return nil, fmt.Errorf("database url %s: %w", redact.URL(url), err)
	}
	secrets := secretsOf(url)
	var prepare map[string]bool
	if pool.Prepared {
		prepare = preparedQueries
	}
	db, err := openPool(url, pool.IdleInTransaction, prepare)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("database url: %w", err), secrets)
	}
	db.SetMaxOpenConns(pool.MaxOpen)
	db.SetMaxIdleConns(pool.MaxIdle)
	db.SetConnMaxLifetime(pool.MaxLifetime)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, redact.Error(fmt.Errorf("connect to database: %w", err), secrets)
	}
	schema, err := migrateUp(db)
	if err != nil {
		db.Close()
		return nil, redact.Error(err, secrets)
	}
	// The id cache starts knowing its server, so that the first write's
	// check (systemWrite.confirm) compares it with the one the ids came from.
	var started time.Time
	if err := db.QueryRowContext(ctx, `SELECT pg_postmaster_start_time()`).Scan(&started); err != nil {
		db.Close()
		return nil, redact.Error(fmt.Errorf("connect to database: %w", err), secrets)
	}
	ids := newIDCache(pool.IDCacheSize)
	ids.seeServer(started)
	h, err := openHealth(ctx, url, secrets, pool.MaxLifetime, pool.IdleInTransaction)
	if err != nil {
		db.Close()
		return nil, err
	}
	ttl := pool.DeletedTTL
	if ttl <= 0 {
		ttl = DefaultPoolSettings().DeletedTTL
	}
	return &Store{db: db, admit: newAdmission(pool.MaxOpen), health: h, deletedTTL: ttl, ids: ids, schema: schema,
		url: url, secrets: secrets}, nil
}

// DefaultConnectTimeout bounds opening a connection of the pool (the dial
// and the handshake, lib/pq's connect_timeout) when the URL sets no
// positive connect_timeout of its own (0, lib/pq's "wait for ever", is
// taken as unset). A handshake made for a call also ends with the call's
// context (guardedConnector); this bound is for those made under none
// (database/sql opens connections in the background for callers waiting
// for one), which a server that accepts connections and never answers
// would otherwise hold for good. The connections lib/pq opens to cancel a
// statement live at most cancelGrace (dialer).
const DefaultConnectTimeout = 5 * time.Second

// idleInTransactionParam is the server setting PoolSettings.IdleInTransaction
// sets, as a run-time parameter of each session's start.
const idleInTransactionParam = "idle_in_transaction_session_timeout"

// openPool opens the pool of url's sessions, each started with
// idle_in_transaction_session_timeout set to idle (in milliseconds) unless
// idle is 0 or url sets it itself (lib/pq passes a parameter it does not
// know to the server), opened within DefaultConnectTimeout unless url sets
// connect_timeout, and keeping the queries of prepare prepared (none when
// nil). Every call on its connections returns by its context's end plus
// cancelGrace, answered or not (guardedConn), over TCP connections with
// keepalives (dialer).
func openPool(url string, idle time.Duration, prepare map[string]bool) (*sql.DB, error) {
	cfg, err := pq.NewConfig(url)
	if err != nil {
		return nil, err
	}
	if !setsParam(cfg, idleInTransactionParam) && idle > 0 {
		if cfg.Runtime == nil {
			cfg.Runtime = map[string]string{}
		}
		cfg.Runtime[idleInTransactionParam] = fmt.Sprint(max(idle.Milliseconds(), 1))
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	connector, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, err
	}
	connector.Dialer(newDialer())
	if prepare != nil {
		return sql.OpenDB(guardedConnector{newPreparingConnector(connector, prepare)}), nil
	}
	return sql.OpenDB(guardedConnector{connector}), nil
}

// setsParam reports whether the connection settings already set the
// server setting name: as a run-time parameter of its own, or as a -c or
// -- switch in options (the URL's options= or PGOPTIONS), which the server
// would apply before the startup parameters, so ours would override it.
// Setting names ignore case, and '-' stands for '_' in a switch.
func setsParam(cfg pq.Config, name string) bool {
	for k := range cfg.Runtime {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	opts := strings.ToLower(strings.ReplaceAll(cfg.Options, "-", "_"))
	return strings.Contains(opts, strings.ToLower(name)+"=")
}

// DB returns the pool the work runs on (for the checker and tests).
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pool and the health-check connection.
func (s *Store) Close() error {
	return errors.Join(s.db.Close(), s.health.db.Close())
}

// Ping is the database's health check: it reports whether the database
// serves what the records need. It reads system the way the records do
// and writes account and system with their insert, rolled back, under a
// statement timeout below ctx's deadline, then commits one row
// (health_check) by the deadline (health.check says what that sees and
// what it cannot): a lock a migration holds on system, a read-only
// server, commits that cannot complete fail it. It runs on the health-check connection, so it
// does not wait for a connection of the pool, however busy the pool is. It
// returns by ctx's deadline (5 s without one) even when the network
// swallows packets, and its errors never contain the URL's password.
func (s *Store) Ping(ctx context.Context) error { return s.health.ping(ctx) }

// withConn runs f on one connection of the pool, taken through the
// admission (urgent work first) and given back after f. A deadline that
// passes while waiting for the connection is congestion, not this record's
// failure. f's calls end by ctx's deadline plus cancelGrace whether the
// server answers or not (guardedConn). Errors come back classified (see
// classify).
func (s *Store) withConn(ctx context.Context, what string, f func(*sql.Conn) error) error {
	if err := s.admit.acquire(ctx); err != nil {
		return classify(poolWait(fmt.Errorf("%s: waiting for a database connection: %w", what, err)))
	}
	defer s.admit.release()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return classify(poolWait(fmt.Errorf("%s: %w", what, err)))
	}
	defer conn.Close()
	return classify(f(conn))
}

// inTx runs f in a transaction, committing on nil and rolling back otherwise.
// Errors come back classified (see classify).
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	if err := s.admit.acquire(ctx); err != nil {
		return classify(poolWait(fmt.Errorf("begin: waiting for a database connection: %w", err)))
	}
	defer s.admit.release()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return classify(poolWait(fmt.Errorf("begin: %w", err)))
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return classify(err)
	}
	if err := tx.Commit(); err != nil {
		return classify(fmt.Errorf("commit: %w", err))
	}
	return nil
}
