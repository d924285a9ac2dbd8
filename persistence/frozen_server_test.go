package persistence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// frozenLink is a toxiproxy proxy, in process on 127.0.0.1, between a
// store and the throwaway PostgreSQL. freeze puts toxiproxy's timeout toxic
// (timeout 0) on both directions: every byte, of the sessions open and of
// any new connection (lib/pq's cancel requests included), is swallowed and
// nothing is closed, as when the server's host freezes or the network
// drops its packets. thaw lets bytes through again.
type frozenLink struct {
	t     *testing.T
	proxy *toxiproxy.Proxy
}

// newFrozenLink returns dbURL's URL through a new proxy, and the proxy.
func newFrozenLink(t *testing.T, dbURL string) (string, *frozenLink) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "postgres", "127.0.0.1:0", u.Host)
	if err := server.Collection.Add(p, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Collection.Remove(p.Name) })
	u.Host = p.Listen
	return u.String(), &frozenLink{t: t, proxy: p}
}

func (l *frozenLink) freeze() {
	l.t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		toxic := fmt.Sprintf(`{"name":"freeze-%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			l.t.Fatal(err)
		}
	}
}

func (l *frozenLink) thaw() { l.proxy.Toxics.ResetToxics(context.Background()) }

// waitFor polls cond every 5 ms until it holds, or fails the test after
// within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockWaiter is the pid of a backend of the database waiting for a lock; 0
// when none is.
func lockWaiter(t *testing.T, admin *sql.DB) int {
	t.Helper()
	var pid int
	err := admin.QueryRow(`SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' LIMIT 1`).Scan(&pid)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return pid
}

func backendAlive(t *testing.T, admin *sql.DB, pid int) bool {
	t.Helper()
	var alive bool
	if err := admin.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
		t.Fatal(err)
	}
	return alive
}

// lockSystem takes LOCK TABLE system IN ACCESS EXCLUSIVE MODE in a
// transaction of admin's, as a migration would; the returned func releases it.
func lockSystem(t *testing.T, admin *sql.DB) (release func()) {
	t.Helper()
	tx, err := admin.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`LOCK TABLE system IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback() }
}

const (
	// callDeadline is the deadline of each call under test.
	callDeadline = 500 * time.Millisecond
	// deadlineMargin is how far past its deadline a call may return.
	deadlineMargin = time.Second
	// callCap is how long a test waits for a call before calling it hung.
	callCap = 15 * time.Second
)

// frozenCall is one of the store's calls the evaluation handler makes, set
// up (prepare, on a healthy link) so that run, started afterwards, reaches
// the server and waits there for the system table.
type frozenCall struct {
	name    string
	prepare func(t *testing.T, s *persistence.Store, i int) (run func(context.Context) error)
}

func frozenCalls() []frozenCall {
	pkgs := []string{"bash", "kernel"}
	return []frozenCall{
		{"CheckUpload", func(t *testing.T, s *persistence.Store, i int) func(context.Context) error {
			u := upload(hostA, t0.Add(time.Duration(i)*time.Hour), pkgs...)
			return func(ctx context.Context) error { _, err := s.CheckUpload(ctx, u); return err }
		}},
		{"StoreEvaluatedSystem", func(t *testing.T, s *persistence.Store, i int) func(context.Context) error {
			u := upload(hostA, t0.Add(time.Duration(i)*time.Hour), pkgs...)
			e := evaluation("RHSA-2026:0001", "installable")
			check, err := s.CheckUpload(context.Background(), u) // the host is stored, its ids are cached
			if err != nil || !check.Apply {
				t.Fatalf("check before the store: %+v, %v", check, err)
			}
			return func(ctx context.Context) error { _, err := s.StoreEvaluatedSystem(ctx, u, e, check); return err }
		}},
		{"DeleteSystem", func(t *testing.T, s *persistence.Store, i int) func(context.Context) error {
			host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", 100+i)
			return func(ctx context.Context) error {
				_, err := s.DeleteSystem(ctx, "org-1", host, t0)
				return err
			}
		}},
	}
}

// A server that stops answering in the middle of a call (its link frozen
// while the statement waits at the server) cannot hold the call past its
// deadline: CheckUpload, StoreEvaluatedSystem and DeleteSystem, prepared
// and as text, return within callDeadline + deadlineMargin with a
// transient error of a lost connection. That connection is closed, not
// given out again (its backend ends once the link thaws), and the next
// call succeeds on a fresh one.
func TestAFrozenServerCannotHoldACallPastItsDeadline(t *testing.T) {
	for _, prepared := range []bool{true, false} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			ctx := context.Background()
			dbURL := pgtest.URL(t)
			proxied, link := newFrozenLink(t, dbURL)
			pool := persistence.DefaultPoolSettings()
			pool.MaxOpen, pool.MaxIdle, pool.Prepared = 1, 1, prepared
			s, err := persistence.Open(ctx, proxied, pool)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			admin, err := sql.Open("postgres", dbURL) // straight to the server, past the proxy
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			// The host stored, its account, packages and advisory known.
			u := upload(hostA, t0, "bash", "kernel")
			check, err := s.CheckUpload(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.StoreEvaluatedSystem(ctx, u, evaluation("RHSA-2026:0001", "installable"), check); err != nil {
				t.Fatal(err)
			}
			for i, c := range frozenCalls() {
				i++
				run := c.prepare(t, s, i)
				if err := run(ctx); err != nil { // once on a healthy link: its statements prepared
					t.Fatalf("%s on a healthy link: %v", c.name, err)
				}
				run = c.prepare(t, s, i+10)
				release := lockSystem(t, admin)
				done := make(chan error, 1)
				start := time.Now()
				go func() {
					cctx, cancel := context.WithTimeout(ctx, callDeadline)
					defer cancel()
					done <- run(cctx)
				}()
				var pid int
				waitFor(t, callDeadline, c.name+" waits for the system table", func() bool { pid = lockWaiter(t, admin); return pid != 0 })
				link.freeze()
				if frozeAt := time.Since(start); frozeAt >= callDeadline {
					release()
					t.Fatalf("%s: the link froze %s after the call began, past its deadline: the test proves nothing", c.name, frozeAt)
				}
				var callErr error
				select {
				case callErr = <-done:
				case <-time.After(callCap):
					link.thaw()
					release()
					<-done
					t.Fatalf("%s with a %s deadline has not returned %s after the server froze", c.name, callDeadline, callCap)
				}
				took := time.Since(start)
				release()
				link.thaw()
				t.Logf("%s returned after %s: %v", c.name, took.Round(time.Millisecond), callErr)
				if took > callDeadline+deadlineMargin {
					t.Errorf("%s returned %s after it began, past its %s deadline + %s", c.name, took, callDeadline, deadlineMargin)
				}
				if callErr == nil || messages.ClassOf(callErr) != messages.ErrorClass_ERROR_CLASS_TRANSIENT ||
					!errors.Is(callErr, driver.ErrBadConn) || messages.IsCongestion(callErr) {
					t.Errorf("%s: %v (class %v), want a transient error of a lost connection", c.name, callErr, messages.ClassOf(callErr))
				}
				// The connection was closed: its backend ends once it reads
				// the end of its socket. One given out again would live on.
				waitFor(t, 10*time.Second, fmt.Sprintf("%s: the frozen call's backend %d ends", c.name, pid), func() bool { return !backendAlive(t, admin, pid) })
				next, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := c.prepare(t, s, i+20)(next)
				cancel()
				if err != nil {
					t.Fatalf("%s after the link thawed: %v", c.name, err)
				}
			}

			// The health check, on a link frozen before it starts.
			link.freeze()
			pctx, cancel := context.WithTimeout(ctx, callDeadline)
			start := time.Now()
			err = s.Ping(pctx)
			took := time.Since(start)
			cancel()
			link.thaw()
			if err == nil || took > callDeadline+deadlineMargin {
				t.Errorf("health check on a frozen link: %v after %s, want an error within %s", err, took, callDeadline+deadlineMargin)
			}
			waitFor(t, 10*time.Second, "the health check passes after the link thawed", func() bool {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				return s.Ping(pctx) == nil
			})
		})
	}
}

// A call past its deadline at a server that answers is stopped at the
// server by lib/pq's cancel request (SQLSTATE 57014), before the guard
// would close its connection: the statement waiting for the system table
// no longer waits, though the lock is still held.
func TestACallPastItsDeadlineIsCancelledAtTheServer(t *testing.T) {
	for _, prepared := range []bool{true, false} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			ctx := context.Background()
			dbURL := pgtest.URL(t)
			pool := persistence.DefaultPoolSettings()
			pool.MaxOpen, pool.MaxIdle, pool.Prepared = 1, 1, prepared
			s, err := persistence.Open(ctx, dbURL, pool)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			admin, err := sql.Open("postgres", dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			u := upload(hostA, t0, "bash", "kernel")
			check, err := s.CheckUpload(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.StoreEvaluatedSystem(ctx, u, evaluation("RHSA-2026:0001", "installable"), check); err != nil {
				t.Fatal(err)
			}
			for i, c := range frozenCalls() {
				i++
				if err := c.prepare(t, s, i)(ctx); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				run := c.prepare(t, s, i+10)
				release := lockSystem(t, admin)
				cctx, cancel := context.WithTimeout(ctx, callDeadline)
				start := time.Now()
				err := run(cctx)
				took := time.Since(start)
				cancel()
				t.Logf("%s returned after %s: %v", c.name, took.Round(time.Millisecond), err)
				var pqErr *pq.Error
				if !errors.As(err, &pqErr) || pqErr.Code != "57014" || took > callDeadline+deadlineMargin {
					release()
					t.Fatalf("%s: %v after %s, want the server's query_canceled (57014) within %s", c.name, err, took, callDeadline+deadlineMargin)
				}
				waitFor(t, 2*time.Second, c.name+": no statement waits for the lock", func() bool { return lockWaiter(t, admin) == 0 })
				release()
			}
		})
	}
}
