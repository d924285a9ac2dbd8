package persistence

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// switchProxy forwards connections to target, or swallows them (accepted,
// never answered, never closed) while hole is set; dropAll closes the
// connections forwarded so far.
func switchProxy(t *testing.T, target string) (addr string, hole *atomic.Bool, dropAll func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hole = new(atomic.Bool)
	var mu sync.Mutex
	var conns []net.Conn
	dropAll = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	t.Cleanup(func() { ln.Close(); dropAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if hole.Load() {
				continue // held open, never answered, never closed by us
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() { _, _ = io.Copy(s, c) }()
			go func() { _, _ = io.Copy(c, s) }()
		}
	}()
	return ln.Addr().String(), hole, dropAll
}

// A connection attempt the server accepts and never answers (a server
// restarting, a proxy without its backend) ends with the check's context
// (guardedConnector; DefaultConnectTimeout bounds one made under none): the
// health check's one connection is not held by it, and checks pass again
// once the server answers.
func TestHealthRecoversAfterAHungHandshake(t *testing.T) {
	dbURL := pgtest.URL(t)
	migrated, err := openPool(dbURL, 0, nil) // the check reads and writes the schema's tables
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(migrated); err != nil {
		t.Fatal(err)
	}
	migrated.Close()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	addr, hole, dropAll := switchProxy(t, u.Host)
	u.Host = addr
	ctx := context.Background()
	h, err := openHealth(ctx, u.String(), nil, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.db.Close()
	hole.Store(true)
	dropAll() // the server restarts; its new connections hang
	short, cancel := context.WithTimeout(ctx, time.Second)
	if err := h.ping(short); err == nil {
		t.Fatal("the health check passed with every connection swallowed")
	}
	cancel()
	hole.Store(false) // the server answers again
	deadline := time.Now().Add(DefaultConnectTimeout + 3*time.Second)
	for {
		short, cancel := context.WithTimeout(ctx, time.Second)
		err := h.ping(short)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the server answers again, the health check still fails: %v", DefaultConnectTimeout+3*time.Second, err)
		}
		time.Sleep(100 * time.Millisecond) // the next check, as readiness probes come
	}
}
