package persistence

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench EffectsStatement -benchtime 4000x: the effects' statement of an
// event with nothing to notify (a remediation message of about 16 KB and
// two payload statuses, as nearly every event of an org whose fleet was
// evaluated), run as writeEffects (with the notification's parts, which
// write nothing here: every event ran it before) and as
// writeEffectsNoNotify, alternating on one connection, both prepared,
// each in a transaction rolled back so that the tables stay as they were.
// One op is one call of each; full-ms/call and without-notify-ms/call
// are their means.
func BenchmarkEffectsStatement(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(b), DefaultPoolSettings())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	u, e := newBenchHosts()()
	if _, err := s.StoreEvaluatedSystem(ctx, u, e, UploadCheck{Apply: true, absent: true}); err != nil {
		b.Fatal(err)
	}
	var (
		id      int64
		account int
	)
	if err := s.db.QueryRowContext(ctx, `SELECT id, account_id FROM system WHERE inventory_id = $1`, u.InventoryID).Scan(&id, &account); err != nil {
		b.Fatal(err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	call := func(full bool, host int) (time.Duration, error) {
		rem := remediationLike(rng, host)
		sum := sha256.Sum256([]byte(rem))
		args := []any{id, sum[:], u.InventoryID, rem, "remediation", pq.Array([]string{`{"status":"received"}`, `{"status":"success"}`}),
			pq.Array([]string{newUUID(rng), newUUID(rng)})}
		query := writeEffectsNoNotify
		if full {
			query, args = writeEffects, append(args, account, pq.Array([]int32{}), nil, u.OrgID)
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback() //nolint:errcheck // the point
		start := time.Now()
		var n int
		if err := tx.QueryRowContext(ctx, query, args...).Scan(new(int64), &n); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if n != 3 {
			b.Fatalf("the statement wrote %d messages, want 3", n)
		}
		return took, nil
	}
	// Each connection prepares a statement on its first call and settles
	// on a generic plan after five: warm both outside the clock.
	for i := range 20 {
		if _, err := call(i%2 == 0, i); err != nil {
			b.Fatal(err)
		}
	}
	var full, without time.Duration
	b.ResetTimer()
	for i := range b.N {
		for _, f := range []bool{i%2 == 0, i%2 != 0} {
			took, err := call(f, i)
			if err != nil {
				b.Fatal(err)
			}
			if f {
				full += took
			} else {
				without += took
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(full.Microseconds())/1000/float64(b.N), "full-ms/call")
	b.ReportMetric(float64(without.Microseconds())/1000/float64(b.N), "without-notify-ms/call")
}
