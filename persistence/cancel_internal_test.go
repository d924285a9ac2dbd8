package persistence

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// halfOpenProxy forwards the first connection to target and accepts every
// later one (lib/pq's cancel requests) without ever answering it: new
// connections to the server hang (a stuck postmaster, a proxy whose
// backend is unreachable) while the established session still works.
func halfOpenProxy(t *testing.T, target string) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				c.Close()
			}
		})
	}
	t.Cleanup(stop)
	go func() {
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			if !first {
				continue // black hole
			}
			first = false
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			held = append(held, s)
			mu.Unlock()
			go func() { _, _ = io.Copy(s, c) }()
			go func() { _, _ = io.Copy(c, s) }()
		}
	}()
	return ln.Addr().String(), stop
}

// A prepared statement whose context ends waits for lib/pq's cancel
// request, on a new connection, to be delivered. When the server accepts
// new connections and never answers them, the dialer closes the cancel
// request's connection cancelGrace after dialing it, and the guard the
// session's: the call returns within its deadline and a second (the pool's
// connect timeout, DefaultConnectTimeout, bounded it before, at 5.2 s),
// and its connection and admission come back.
func TestACancelledPreparedStatementReturnsWhenItsCancelCannotBeDelivered(t *testing.T) {
	const q = `SELECT pg_sleep($1::float8)`
	const deadline = 200 * time.Millisecond
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	var stop func()
	u.Host, stop = halfOpenProxy(t, u.Host)
	db := openPreparing(t, u.String(), q)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, q, 0.0); err != nil { // prepared now
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		short, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		_, err := conn.ExecContext(short, q, 30.0)
		done <- err
	}()
	bound := deadline + time.Second
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("returned after %s: %v", took.Round(time.Millisecond), err)
		if took > bound {
			t.Fatalf("a 30 s statement with a %s deadline returned after %s, past %s", deadline, took, bound)
		}
	case <-time.After(DefaultConnectTimeout + 3*time.Second):
		stop() // unblock the call, so the test can end
		<-done
		t.Fatalf("a 30 s statement with a %s deadline has not returned after %s (waiting for its cancel request)", deadline, DefaultConnectTimeout+3*time.Second)
	}
}
