package persistence_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
