package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// A server that accepts connections and never answers holds lib/pq in its
// handshake with no deadline; the health ping still returns by its own,
// and so does the next one while the first is still stuck.
func TestHealthPingReturnsByItsDeadlineBehindABlackHole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { // the stuck driver reads EOF and its goroutine ends
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	db, err := sql.Open("postgres", "postgres://patch:pw@"+ln.Addr().String()+"/patch?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	h := &health{db: db}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- h.ping(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ping %d: %v, want a deadline error", i, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("ping %d took %v with a 200ms deadline", i, took)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ping %d still waiting 5s after its 200ms deadline", i)
		}
		cancel()
	}
}

// Whatever form the password takes in the URL and in an error's text, the
// health ping's errors show xxxxx instead.
func TestHealthErrorsNeverShowThePassword(t *testing.T) {
	const password = "s3cr@t/pa ss"
	for _, dsn := range []string{
		"postgres://patch:s3cr%40t%2Fpa%20ss@db.example:5432/patch",
		"host=db.example user=patch password='s3cr@t/pa ss' dbname=patch",
	} {
		h := &health{secrets: secretsOf(dsn)}
		if len(h.secrets) == 0 {
			t.Fatalf("%s: no password found", dsn)
		}
		for _, leak := range []error{
			fmt.Errorf("connecting to %s: refused", dsn),
			fmt.Errorf("password %q rejected", password),
			fmt.Errorf("wrapped: %w", errors.New("s3cr%40t%2Fpa+ss")),
		} {
			got := h.redact(leak).Error()
			for _, form := range []string{password, "s3cr%40t", "s3cr@t", "pa+ss", "pa%20ss"} {
				if strings.Contains(got, form) {
					t.Errorf("%s: %q shows %q", dsn, got, form)
				}
			}
			if !strings.Contains(got, "xxxxx") {
				t.Errorf("%s: %q lost the place of the password", dsn, got)
			}
		}
	}
	// An error without the password comes back untouched, wrapping intact.
	h := &health{secrets: secretsOf("postgres://patch:pw@db/patch")}
	if err := h.redact(fmt.Errorf("ping: %w", context.DeadlineExceeded)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an error without the password lost its cause: %v", err)
	}
}
