package persistence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// Ping judges the database, not the queue for its connections: with every
// connection of the pool held by the work, it still answers at once.
func TestPingAnswersWhileThePoolIsSaturated(t *testing.T) {
	ctx := context.Background()
	pool := persistence.DefaultPoolSettings()
	pool.MaxOpen, pool.MaxIdle = 2, 2
	s, err := persistence.Open(ctx, pgtest.URL(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range pool.MaxOpen { // an open transaction holds its connection until it ends
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
	}
	// The pool is saturated: anything that needs one of its connections waits.
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := s.DB().PingContext(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a ping through the saturated pool: %v, want it to wait past its deadline", err)
	}
	if in := s.DB().Stats().InUse; in != pool.MaxOpen {
		t.Fatalf("%d connections of the pool in use, want %d", in, pool.MaxOpen)
	}

	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	err = s.Ping(pctx)
	if took := time.Since(start); err != nil || took > time.Second {
		t.Fatalf("Ping with the pool saturated: %v after %v, want nil at once", err, took)
	}
}

// A deadline that passes while waiting for a connection of a saturated pool
// is marked as congestion: the pipeline must not count it as the record's
// own failure.
func TestPoolWaitIsCongestion(t *testing.T) {
	ctx := context.Background()
	pool := persistence.DefaultPoolSettings()
	pool.MaxOpen, pool.MaxIdle = 1, 1
	s, err := persistence.Open(ctx, pgtest.URL(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = s.LoadSystem(wctx, "org", "host")
	if !messages.IsCongestion(err) || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT || messages.DependencyOf(err) != messages.DependencyDatabase {
		t.Fatalf("load with the pool taken: %v (congestion %v, class %v)", err, messages.IsCongestion(err), messages.ClassOf(err))
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	_, err = s.DeleteSystem(wctx2, "org", "8a3f1c2e-0000-4000-8000-000000000001", time.Now())
	if !messages.IsCongestion(err) {
		t.Fatalf("a transaction with the pool taken: %v, want congestion", err)
	}
}
