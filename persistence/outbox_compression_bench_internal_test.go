package persistence

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// remediationLike is a remediation message of about the size and shape a
// host of 400 packages has (13-15 KB): its advisories and each updatable
// package's newest NEVRA, prefixed, sorted.
func remediationLike(rng *rand.Rand, host int) string {
	var issues []string
	for range 150 {
		issues = append(issues, fmt.Sprintf("patch:RH%cA-20%02d:%05d", "SBE"[rng.IntN(3)], 18+rng.IntN(8), rng.IntN(20000)))
	}
	for range 300 {
		issues = append(issues, fmt.Sprintf("patch:pkg-%04d-0:%d.%d.%d-%d.el9_%d.%s", rng.IntN(3000), rng.IntN(9), rng.IntN(30), rng.IntN(200),
			1+rng.IntN(40), rng.IntN(6), []string{"x86_64", "noarch", "i686"}[rng.IntN(3)]))
	}
	slices.Sort(issues)
	b, _ := json.Marshal(struct {
		HostID string   `json:"host_id"`
		Issues []string `json:"issues"`
	}{fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", host), issues})
	return string(b)
}

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench OutboxPayloadCompression -benchtime 2000x: a remediation-like
// message written to a table of the outbox's shape, read back and deleted,
// a statement each on one connection, its payload compressed by pglz (the
// outbox before migration 5) and by lz4, in one run. The time per message
// is the three round trips', so the two differ by the server's CPU for
// compressing and decompressing; WAL-bytes/msg is what they wrote.
func BenchmarkOutboxPayloadCompression(b *testing.B) {
	db, err := sql.Open("postgres", pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var lz4 bool
	if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))`).Scan(&lz4); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	payloads := make([]string, 256)
	for i := range payloads {
		payloads[i] = remediationLike(rng, i)
	}
	for _, method := range []string{"pglz", "lz4"} {
		if method == "lz4" && !lz4 {
			continue
		}
		b.Run(method, func(b *testing.B) {
			table := "bench_outbox_" + method
			for _, q := range []string{
				`DROP TABLE IF EXISTS ` + table,
				`CREATE TABLE ` + table + ` (id BIGSERIAL PRIMARY KEY, ordering_key TEXT NOT NULL, payload TEXT COMPRESSION ` + method + ` NOT NULL)`,
				`CREATE INDEX ON ` + table + ` (ordering_key, id)`,
			} {
				if _, err := db.Exec(q); err != nil {
					b.Fatal(err)
				}
			}
			defer db.Exec(`DROP TABLE ` + table)
			var wal0 string
			if err := db.QueryRow(`SELECT pg_current_wal_lsn()::text`).Scan(&wal0); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				key := fmt.Sprint(i)
				if _, err := db.Exec(`INSERT INTO `+table+` (ordering_key, payload) VALUES ($1, $2)`, key, payloads[i%len(payloads)]); err != nil {
					b.Fatal(err)
				}
				var got string
				if err := db.QueryRow(`SELECT payload FROM `+table+` WHERE ordering_key = $1`, key).Scan(&got); err != nil || len(got) != len(payloads[i%len(payloads)]) {
					b.Fatalf("read back %d bytes, err %v", len(got), err)
				}
				if _, err := db.Exec(`DELETE FROM `+table+` WHERE ordering_key = $1`, key); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var wal float64
			if err := db.QueryRow(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, wal0).Scan(&wal); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(wal/float64(b.N), "WAL-bytes/msg")
		})
	}
}
