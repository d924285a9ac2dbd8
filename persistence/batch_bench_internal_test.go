package persistence

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench StoreBatched -benchtime 2000x: is a batch of events written in
// one transaction (BatchHandler's shape) worth building into the listener?
// New hosts of 400 packages, each evaluated (150 advisories) with its
// effects (a remediation state by reference, a notification, two payload
// statuses), are written by 8 writers (the listener's pool) one
// transaction per event, as the listener does, and in batches of 16 and
// 64 events per transaction,
// each event under a savepoint (one bad record must not fail its
// batchmates), in one run. It reports events/s, the CPU all PostgreSQL's
// processes spent per event (backends and background workers; autovacuum
// workers that came and went are missed), and WAL bytes per event. The
// shared rows (packages, advisories, the account) are resolved before the
// clock starts, as the id cache has them in the steady state.
func BenchmarkStoreBatched(b *testing.B) {
	ctx := context.Background()
	url := pgtest.URL(b)
	s, err := Open(ctx, url, DefaultPoolSettings())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const writers = 8
	next := newBenchHosts()
	// Warm the id cache and the tables.
	for range 64 {
		u, e := next()
		if _, err := s.StoreEvaluatedSystem(ctx, u, e, UploadCheck{Apply: true, absent: true}); err != nil {
			b.Fatal(err)
		}
	}
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			events := make([][2]any, b.N)
			for i := range events {
				u, e := next()
				events[i] = [2]any{u, e}
			}
			meter, err := startPGMeter(ctx, s.db)
			if err != nil {
				b.Fatal(err)
			}
			var systems0 int
			if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM system`).Scan(&systems0); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			err = inParallel(writers, len(events), batch, func(from, to int) error {
				if batch == 1 {
					u, e := events[from][0].(SystemUpload), events[from][1].(Evaluation)
					_, err := s.StoreEvaluatedSystem(ctx, u, e, UploadCheck{Apply: true, absent: true})
					return err
				}
				return storeBatchInOneTransaction(ctx, s, events[from:to])
			})
			took := time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			cpu, wal, err := meter.stop(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var systems1 int
			if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM system`).Scan(&systems1); err != nil {
				b.Fatal(err)
			}
			if systems1-systems0 != b.N {
				b.Fatalf("%d hosts written, want %d", systems1-systems0, b.N)
			}
			n := float64(b.N)
			b.ReportMetric(n/took.Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Microseconds())/1000/n, "pg-cpu-ms/event")
			b.ReportMetric(float64(wal)/n, "WAL-bytes/event")
		})
	}
}

// benchHosts returns a generator of new hosts of 400 packages, each with
// its evaluation (150 advisories, half installable) and effects (a
// remediation state of those advisories and 300 updates, 16 KB as a
// message; a notification context; two payload statuses), in 50 orgs. Not
// safe for concurrent use.
func newBenchHosts() func() (SystemUpload, Evaluation) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := upload400()
	advisories := make([]AdvisoryResult, 150)
	for i := range advisories {
		st := Applicable
		if i%2 == 0 {
			st = Installable
		}
		advisories[i] = AdvisoryResult{Name: fmt.Sprintf("RHSA-2026:%05d", i), Type: "security", Status: st}
	}
	host := 0
	return func() (SystemUpload, Evaluation) {
		host++
		u := base
		u.Packages = append([]Package(nil), base.Packages...)
		u.Modules = append([]Module(nil), base.Modules...)
		u.OrgID, u.InventoryID = fmt.Sprintf("org-%d", host%50), fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", host)
		u.EventTime = time.Unix(1_800_000_000, 0)
		e := Evaluation{Advisories: advisories, PackagesUpdatable: 120, Effects: &Effects{
			Remediation:   benchRemediation(rng),
			Notify:        &NotifyContext{InventoryID: u.InventoryID},
			PayloadStatus: []Message{{EventID: newUUID(rng), Value: []byte(`{"status":"received"}`)}, {EventID: newUUID(rng), Value: []byte(`{"status":"success"}`)}}}}
		return u, e
	}
}

// storeBatchInOneTransaction writes new hosts' uploads with their
// evaluations and effects in one transaction on one connection, each under
// a savepoint and its host's lock, as a batched StoreEvaluatedSystem would.
func storeBatchInOneTransaction(ctx context.Context, s *Store, events [][2]any) error {
	return s.withConn(ctx, "store batch", func(conn *sql.Conn) error {
		writes := make([]systemWrite, len(events))
		view := s.ids.view()
		for i, ev := range events {
			u, e := ev[0].(SystemUpload), ev[1].(Evaluation)
			u.canonicalize()
			row := newEvaluationRow(e)
			accountID, err := s.ids.accountID(ctx, conn, view, u.OrgID)
			if err != nil {
				return err
			}
			pkgIDs, err := s.ids.packageIDs(ctx, conn, view, u.Packages)
			if err != nil {
				return err
			}
			ids, err := s.ids.advisoryIDs(ctx, conn, view, row.names, row.types)
			if err != nil {
				return err
			}
			advIDs, installableIDs := row.ids(ids)
			unknownIDs := s.ids.notified.unknown(accountID, installableIDs)
			host := strings.ToLower(u.InventoryID)
			rem, err := s.resolveRemediation(ctx, conn, view, host, row, advIDs, e.Effects.Remediation)
			if err != nil {
				return err
			}
			writes[i] = systemWrite{accountID: accountID, u: &u, sum: u.checksum(), pkgIDs: pkgIDs, ev: row, advIDs: advIDs, installableIDs: installableIDs,
				fx: effectsWrite{e: e.Effects, inventoryID: host, orgID: u.OrgID, accountID: accountID, installable: unknownIDs, evaluated: true, remediation: rem}}
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		for i := range writes {
			w := &writes[i]
			if _, err := tx.ExecContext(ctx, `SAVEPOINT event`); err != nil {
				return err
			}
			if _, err := lockHost(ctx, tx, w.u.InventoryID); err != nil {
				return err
			}
			id, err := w.insert(ctx, tx)
			if err != nil {
				return err
			}
			if id == 0 {
				return fmt.Errorf("host %s stored already", w.u.InventoryID)
			}
			if err := w.fx.write(ctx, tx, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT event`); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		for _, w := range writes {
			s.ids.notifiedCommitted(view, w.accountID, w.installableIDs)
		}
		s.outboxWritten()
		return nil
	})
}

// inParallel runs do over [0, n) in slices of at most batch, on workers
// goroutines taking the next slice as they finish; the first error ends it.
func inParallel(workers, n, batch int, do func(from, to int) error) error {
	var taken atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				end := int(taken.Add(int64(batch)))
				from := end - batch
				if from >= n {
					return
				}
				if err := do(from, min(end, n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// pgMeter measures what the server spent from its start to its stop: the
// CPU of its processes (postgresCPU) and the WAL it wrote. It starts after
// a checkpoint, so that full-page writes land alike in every measurement.
type pgMeter struct {
	db  *sql.DB
	cpu time.Duration
	wal string
}

func startPGMeter(ctx context.Context, db *sql.DB) (*pgMeter, error) {
	if _, err := db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return nil, err
	}
	m := &pgMeter{db: db}
	var err error
	if m.cpu, err = postgresCPU(ctx, db); err != nil {
		return nil, err
	}
	return m, db.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&m.wal)
}

func (m *pgMeter) stop(ctx context.Context) (cpu time.Duration, wal int64, err error) {
	now, err := postgresCPU(ctx, m.db)
	if err != nil {
		return 0, 0, err
	}
	err = m.db.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn() - $1::pg_lsn`, m.wal).Scan(&wal)
	return now - m.cpu, wal, err
}

// postgresCPU is the user and system CPU the server has spent, read from
// /proc: the postmaster's own and that of the children it has reaped
// (cutime, cstime), and each live child's. Children that end between two
// readings (an autovacuum worker, a connection closed) are counted by
// their parent's totals, so the difference of two readings is what the
// server spent between them however its processes came and went.
func postgresCPU(ctx context.Context, db *sql.DB) (time.Duration, error) {
	var backend int
	if err := db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, err
	}
	b, err := procStat(backend)
	if err != nil {
		return 0, fmt.Errorf("the server's processes are not on this machine: %w", err)
	}
	postmaster := int(b[1])
	p, err := procStat(postmaster)
	if err != nil {
		return 0, err
	}
	ticks := p[11] + p[12] + p[13] + p[14]
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == postmaster {
			continue
		}
		f, err := procStat(pid)
		if err != nil || int(f[1]) != postmaster {
			continue // gone meanwhile, or not the server's
		}
		ticks += f[11] + f[12]
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil // USER_HZ is 100 on Linux
}

// procStat is /proc/pid/stat's numeric fields from the state on: [1] is
// the parent's pid, [11] to [14] utime, stime, cutime and cstime in ticks.
func procStat(pid int) ([]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(fields) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	out := make([]int64, 15)
	for i := 1; i < 15; i++ {
		out[i], _ = strconv.ParseInt(fields[i], 10, 64)
	}
	return out, nil
}

func newUUID(rng *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint32()&0xfff, rng.Uint64()&0xffffffffffff)
}

// benchRemediation is a host's 300 updates, drawn from a fleet's 3,000:
// each package's newest update is the same on every host that has it, so
// the fleet's updates are stored once in the package dictionary.
func benchRemediation(rng *rand.Rand) *Remediation {
	r := &Remediation{}
	for _, i := range rng.Perm(3000)[:300] {
		r.Updates = append(r.Updates, Package{Name: fmt.Sprintf("pkg-%04d", i),
			EVRA: fmt.Sprintf("0:%d.%d.%d-%d.el9_%d.%s", i%9, i%30, i%200, 1+i%40, i%6, []string{"x86_64", "noarch", "i686"}[i%3])})
	}
	return r
}
