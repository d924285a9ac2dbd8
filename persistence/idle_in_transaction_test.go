package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// A session of the pool paused inside a transaction (its process stopped,
// as a paused VM or a long GC stops a listener) holds its row locks; with
// IdleInTransaction the server ends it, and the rest of the pool gets the
// rows. Without it, every writer to those rows waits for as long as the
// pause lasts (forever, for a VM that never comes back).
func TestAPausedTransactionDoesNotHoldItsLocks(t *testing.T) {
	ctx := context.Background()
	pool := persistence.DefaultPoolSettings()
	pool.IdleInTransaction = 500 * time.Millisecond
	s, err := persistence.Open(ctx, pgtest.URL(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS paused_lock_probe (id int PRIMARY KEY, v int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO paused_lock_probe VALUES (1, 0) ON CONFLICT (id) DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	// The paused holder: locks the row, then does nothing.
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // ended by the server, or by a failing test
	if _, err := tx.ExecContext(ctx, `UPDATE paused_lock_probe SET v = v + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	// Another writer of the same row, on another session of the pool.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := db.ExecContext(wctx, `UPDATE paused_lock_probe SET v = v + 10 WHERE id = 1`); err != nil {
		t.Fatalf("the other writer waited %v and failed: %v (the paused transaction kept its lock)", time.Since(start).Round(time.Millisecond), err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the other writer waited %v for a session idle in its transaction for 500 ms", waited)
	}
	// The holder's transaction was ended by the server: its commit fails,
	// and its update is not there.
	if err := tx.Commit(); err == nil {
		t.Fatal("the paused transaction committed after the server should have ended it")
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT v FROM paused_lock_probe WHERE id = 1`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v%10 != 0 {
		t.Fatalf("v = %d: the paused transaction's update was kept", v)
	}
}
