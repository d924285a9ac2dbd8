package listener_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
	"github.com/patchflow/patchflow/proving/simulated"
)

// The listener checks the database in the background through Hooks.Ping:
// /readyz fails with the error once the checks have failed for
// LISTENER_READY_DB_GRACE, passes again as soon as one passes, and each
// change is logged once.
func TestReadinessFollowsTheDatabaseCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := map[string]string{"KAFKA_BROKERS": "embedded", "EMBEDDED_PARTITIONS": "1", "LISTENER_HTTP_ADDR": addr,
		"LISTENER_PROGRESS_INTERVAL": "0", "LISTENER_READY_DB_GRACE": "1500ms"}
	cfg, _, err := parse(nil, lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReadyDBGrace != 1500*time.Millisecond {
		t.Fatalf("LISTENER_READY_DB_GRACE read as %v", cfg.ReadyDBGrace)
	}
	var down atomic.Bool
	var failedSince atomic.Int64
	ping := func(context.Context) error {
		if down.Load() {
			failedSince.CompareAndSwap(0, time.Now().UnixNano())
			return errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
		}
		return nil
	}
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- listener.Run(ctx, cfg, simulated.Handler{}, slog.New(slog.NewTextHandler(&logs, nil)),
			listener.Hooks{Metrics: telemetry.New(), Ping: ping})
	}()
	defer func() { cancel(); <-done }()
	base := "http://" + addr

	eventually(t, "ready", func() bool { code, _ := getMaybe(base + "/readyz"); return code == 200 })
	down.Store(true)
	eventually(t, "not ready for the database", func() bool {
		code, body := get(t, base+"/readyz")
		if code == 200 {
			return false
		}
		if code != 503 || !strings.Contains(body, "database unreachable for") || !strings.Contains(body, "connection refused") {
			t.Fatalf("/readyz %d %q", code, body)
		}
		return true
	})
	if since := time.Since(time.Unix(0, failedSince.Load())); since < 1500*time.Millisecond {
		t.Fatalf("not ready %v after the first failed check, within the 1.5s grace", since)
	}
	down.Store(false)
	eventually(t, "ready again", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })

	var changes []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "readiness") {
			changes = append(changes, l)
		}
	}
	if len(changes) != 3 || !strings.Contains(changes[0], `"readiness: ready"`) ||
		!strings.Contains(changes[1], `"readiness: not ready" reason="database unreachable for`) ||
		!strings.Contains(changes[2], `"readiness: ready"`) {
		t.Fatalf("readiness changes logged:\n%s", strings.Join(changes, "\n"))
	}
}

// getMaybe is get for a server that may not listen yet.
func getMaybe(u string) (int, string) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Against PostgreSQL: with every connection of the pool held by the work,
// the database check still passes at once; after the server drops its
// connection, the next check reconnects and passes; when the database
// refuses connections the reason says so without the URL's password; when
// it takes them again the check passes.
func TestDatabaseCheckOnPostgreSQL(t *testing.T) {
	const secret = "pa55-w0rd-never-shown"
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret) // the test server trusts any password
	dbName := strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	pool := persistence.DefaultPoolSettings()
	pool.MaxOpen, pool.MaxIdle = 2, 2
	store, err := persistence.Open(ctx, u.String(), pool)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	watch := telemetry.NewDependencyWatch("database", store.Ping, 0, 2*time.Second)

	for range pool.MaxOpen {
		tx, err := store.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
	}
	start := time.Now()
	watch.Check(ctx)
	if up, why := watch.Up(time.Now()); !up || time.Since(start) > time.Second {
		t.Fatalf("with the pool saturated: up %v (%q) after %v, want up at once", up, why, time.Since(start))
	}

	admin, err := sql.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	allow := func(on bool) {
		t.Helper()
		if _, err := admin.Exec(`ALTER DATABASE ` + pq.QuoteIdentifier(dbName) + ` ALLOW_CONNECTIONS ` + map[bool]string{true: "true", false: "false"}[on]); err != nil {
			t.Fatal(err)
		}
	}
	// dropAll cuts every connection to the database, the health check's
	// among them, as a restart or a failover does.
	dropAll := func() {
		t.Helper()
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1`, dbName); err != nil {
			t.Fatal(err)
		}
	}
	dropAll()
	watch.Check(ctx)
	if up, why := watch.Up(time.Now()); !up {
		t.Fatalf("after the server dropped the connection: down (%q), want the check to reconnect at once", why)
	}

	allow(false)
	defer allow(true)
	dropAll()
	watch.Check(ctx)
	up, why := watch.Up(time.Now())
	if up || !strings.HasPrefix(why, "database unreachable for 0s (since ") || !strings.Contains(why, "not currently accepting connections") {
		t.Fatalf("database refusing connections: up %v, reason %q", up, why)
	}
	if strings.Contains(why, secret) {
		t.Fatalf("reason shows the password: %q", why)
	}

	allow(true)
	watch.Check(ctx)
	if up, why := watch.Up(time.Now()); !up {
		t.Fatalf("database back: still down: %q", why)
	}
}
