package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench EffectsCost -benchtime 2000x: what PostgreSQL's CPU pays for the
// effects, against what the target allows it. New hosts
// (newBenchHosts) are checked and written as the handler does (CheckUpload,
// then StoreEvaluatedSystem), by as many writers as the pool's default
// connections, in phases of b.N events without their effects and with
// them, alternating (on, off, off, on, on, off) so that the server's drift
// falls on neither. During a phase with them one relay claims the outbox a
// linger apart, 500 messages a round, as the listener's does, and settles
// each round as published (deleting its rows); the phase ends once the
// outbox is empty, so it carries the whole of its messages' cost.
//
// Each phase's CPU is every PostgreSQL process's, per event. off-pg-ms and
// on-pg-ms are the medians of the three phases of each; floor-pg-ms is the
// median of the three pairs' differences (on less off, the pairs in the
// order run); allowance-pg-ms is off-pg-ms / 9: at most 10 % fewer events
// per second where PostgreSQL is what is full allows at most 11 % more of
// its CPU per event.
func BenchmarkEffectsCost(b *testing.B) { benchmarkEffectsCost(b, nil, false) }

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench EffectsCostOfUpdates -benchtime 2000x: BenchmarkEffectsCost with
// each phase's events updates of hosts created (untimed) just before it,
// each with a remediation state of its own, their orgs told of their
// advisories already: a known org's host's next upload.
func BenchmarkEffectsCostOfUpdates(b *testing.B) { benchmarkEffectsCost(b, nil, true) }

// benchmarkEffectsCost is BenchmarkEffectsCost with each event's effects
// passed through shape first, when it is set, and its events updates when
// update is set.
func benchmarkEffectsCost(b *testing.B, shape func(*Effects), update bool) {
	on, off, published := comparePhases(b, effectsVariant{on: true, shape: shape, update: update}, effectsVariant{update: update})
	want := 3 // a remediation and two payload statuses
	if shape != nil {
		want = 1
	}
	if published < want*3*b.N {
		b.Fatalf("the relay published %d messages for %d events with effects, want at least %d each", published, 3*b.N, want)
	}
	floor := make([]float64, len(on.ms))
	for i := range on.ms {
		floor[i] = on.ms[i] - off.ms[i]
	}
	b.ReportMetric(median(off.ms), "off-pg-ms/event")
	b.ReportMetric(median(on.ms), "on-pg-ms/event")
	b.ReportMetric(median(floor), "floor-pg-ms/event")
	b.ReportMetric(median(off.ms)/9, "allowance-pg-ms/event")
	b.ReportMetric(off.wal/float64(3*b.N), "off-WAL-bytes/event")
	b.ReportMetric(on.wal/float64(3*b.N), "on-WAL-bytes/event")
	b.ReportMetric(float64(published)/float64(3*b.N), "messages/event")
}

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench RemediationByReference -benchtime 2000x: what writing each host's
// remediation state by reference (schema 6) saves PostgreSQL against
// writing its whole message, as BenchmarkEffectsCost measures the effects
// (every effect on in both), the two ways in alternating phases (by
// reference, whole, whole, by reference, by reference, whole) of one run:
// saved-pg-ms is the median of the three pairs' differences.
func BenchmarkRemediationByReference(b *testing.B) {
	whole := func(e *Effects) {
		w := &Remediation{}
		for _, p := range e.Remediation.Updates {
			w.Verbatim = append(w.Verbatim, p.Name+"-"+p.EVRA)
		}
		e.Remediation = w
	}
	ref, wh, _ := comparePhases(b, effectsVariant{on: true}, effectsVariant{on: true, shape: whole})
	saved := make([]float64, len(ref.ms))
	for i := range ref.ms {
		saved[i] = wh.ms[i] - ref.ms[i]
	}
	b.ReportMetric(median(ref.ms), "by-reference-pg-ms/event")
	b.ReportMetric(median(wh.ms), "whole-pg-ms/event")
	b.ReportMetric(median(saved), "saved-pg-ms/event")
	b.ReportMetric(ref.wal/float64(3*b.N), "by-reference-WAL-bytes/event")
	b.ReportMetric(wh.wal/float64(3*b.N), "whole-WAL-bytes/event")
}

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench UpdateEffectsInOneStatement -benchtime 2000x: what writing an
// update's effects in the update's own statement (one round trip, which
// commits by itself) saves against a transaction around the update and
// the effects' statement (four round trips: BEGIN, the two, COMMIT), as
// BenchmarkEffectsCost measures the effects, every effect on in both. Each
// phase updates b.N hosts created just before it (untimed), each with a
// remediation state of its own and two payload statuses, its org told of
// its advisories already, as a host's next upload of a known org. The two
// ways alternate (one statement, apart, apart, one, one, apart);
// saved-pg-ms is the median of the three pairs' differences, and the
// per-event wall time and this process's CPU (the writers' side of the
// round trips) are reported beside it.
func BenchmarkUpdateEffectsInOneStatement(b *testing.B) {
	one, apart, published := comparePhases(b, effectsVariant{on: true, update: true}, effectsVariant{on: true, update: true, apart: true})
	if want := 2 * 3 * 3 * b.N; published < want { // a remediation and two statuses an update, six phases of b.N
		b.Fatalf("the relay published %d messages, want at least %d", published, want)
	}
	saved := make([]float64, len(one.ms))
	for i := range one.ms {
		saved[i] = apart.ms[i] - one.ms[i]
	}
	b.ReportMetric(median(one.ms), "one-statement-pg-ms/event")
	b.ReportMetric(median(apart.ms), "apart-pg-ms/event")
	b.ReportMetric(median(saved), "saved-pg-ms/event")
	b.ReportMetric(median(one.client), "one-statement-client-ms/event")
	b.ReportMetric(median(apart.client), "apart-client-ms/event")
	b.ReportMetric(median(one.wall), "one-statement-wall-ms/event")
	b.ReportMetric(median(apart.wall), "apart-wall-ms/event")
}

// updateThenEffects is how an update wrote its effects before they were
// one statement with it: a transaction around the update and the effects'
// statement.
func updateThenEffects(w *systemWrite, ctx context.Context, conn *sql.Conn) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	id, err := w.updateIfNewer(ctx, tx)
	if err != nil || id == 0 {
		return 0, err
	}
	if err := w.fx.write(ctx, tx, id); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}

// effectsVariant is how a phase writes its events: with their effects
// (passed through shape, when set) or without; as new hosts, or as
// updates of hosts created just before the phase (update), their effects
// then written apart from the update when apart is set
// (updateThenEffects).
type effectsVariant struct {
	on     bool
	shape  func(*Effects)
	update bool
	apart  bool
}

// phaseCost is what a variant's phases cost PostgreSQL: its CPU per event
// in each phase, in the order run, and the WAL of all of them; and, per
// event in each phase, this process's CPU and the wall time.
type phaseCost struct {
	ms           []float64
	wal          float64
	client, wall []float64
}

// comparePhases writes b.N new hosts in each of six phases, x, y, y, x, x,
// y, the relay beside the writers in a phase with effects, and returns
// what each variant's phases cost, and how many messages the relay
// published.
func comparePhases(b *testing.B, x, y effectsVariant) (xc, yc phaseCost, published int) {
	ctx := context.Background()
	pool := DefaultPoolSettings()
	s, err := Open(ctx, pgtest.URL(b), pool)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	o, err := s.OpenOutbox()
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	next := newBenchHosts()
	defer func() { updateEffectsApart = nil }() // set by an apart phase, even one that fails
	// created are the hosts the next update phase updates.
	var created [][2]any
	rng := rand.New(rand.NewPCG(5, 6))
	events := func(n int, v effectsVariant) [][2]any {
		events := make([][2]any, n)
		for i := range events {
			var u SystemUpload
			var e Evaluation
			if v.update {
				u, e = created[i][0].(SystemUpload), created[i][1].(Evaluation)
				u.EventTime = u.EventTime.Add(time.Minute)
				fx := *e.Effects
				fx.Remediation = benchRemediation(rng)
				fx.PayloadStatus = []Message{{EventID: newUUID(rng), Value: []byte(`{"status":"received"}`)}, {EventID: newUUID(rng), Value: []byte(`{"status":"success"}`)}}
				e.Effects = &fx
			} else {
				u, e = next()
			}
			if !v.on {
				e.Effects = nil
			} else if v.shape != nil {
				v.shape(e.Effects)
			}
			events[i] = [2]any{u, e}
		}
		return events
	}
	store := func(events [][2]any) error {
		return inParallel(pool.MaxOpen, len(events), 1, func(from, _ int) error {
			u, e := events[from][0].(SystemUpload), events[from][1].(Evaluation)
			check, err := s.CheckUpload(ctx, u)
			if err != nil {
				return err
			}
			res, err := s.StoreEvaluatedSystem(ctx, u, e, check)
			if err == nil && !res.Applied {
				err = fmt.Errorf("host %s not written: %+v", u.InventoryID, res)
			}
			return err
		})
	}
	write := func(n int, v effectsVariant) error { return store(events(n, v)) }
	round := func() (int, error) {
		msgs, finish, err := o.Claim(ctx, 500, nil)
		if err != nil {
			return 0, err
		}
		out := messages.OutboxOutcome{}
		for _, m := range msgs {
			out.Published = append(out.Published, m.ID)
		}
		published += len(msgs)
		return len(msgs), finish(ctx, out)
	}
	drain := func() error {
		for {
			if n, err := round(); err != nil || n == 0 {
				return err
			}
		}
	}
	// withRelay runs write with the relay's rounds a linger apart beside
	// it, then drains what is left.
	withRelay := func(write func() error) error {
		stop, ended := make(chan struct{}), make(chan error, 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(100 * time.Millisecond) // the listener's default OUTBOX_LINGER
			defer t.Stop()
			for {
				select {
				case <-stop:
					ended <- nil
					return
				case <-t.C:
				}
				if _, err := round(); err != nil {
					ended <- err
					return
				}
			}
		})
		err := write()
		close(stop)
		wg.Wait()
		if rerr := <-ended; err == nil {
			err = rerr
		}
		if err == nil {
			err = drain()
		}
		return err
	}
	// Warm the id cache and the tables, and empty the outbox.
	if err := write(64, effectsVariant{on: true}); err != nil {
		b.Fatal(err)
	}
	if err := drain(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for _, v := range []*effectsVariant{&x, &y, &y, &x, &x, &y} {
		if v.update { // the hosts it updates, untimed
			b.StopTimer()
			created = events(b.N, effectsVariant{on: true})
			before := published
			if err := withRelay(func() error { return store(created) }); err != nil {
				b.Fatal(err)
			}
			published = before // the phase's own messages only
			b.StartTimer()
		}
		updateEffectsApart = nil
		if v.apart {
			updateEffectsApart = updateThenEffects
		}
		clientStart, wallStart := processCPU(), time.Now()
		meter, err := startPGMeter(ctx, s.db)
		if err != nil {
			b.Fatal(err)
		}
		if v.on {
			err = withRelay(func() error { return write(b.N, *v) })
		} else {
			err = write(b.N, *v)
		}
		if err != nil {
			b.Fatal(err)
		}
		cpu, wal, err := meter.stop(ctx)
		if err != nil {
			b.Fatal(err)
		}
		c := &yc
		if v == &x {
			c = &xc
		}
		c.ms, c.wal = append(c.ms, float64(cpu.Microseconds())/1000/float64(b.N)), c.wal+float64(wal)
		c.client = append(c.client, float64((processCPU()-clientStart).Microseconds())/1000/float64(b.N))
		c.wall = append(c.wall, float64(time.Since(wallStart).Microseconds())/1000/float64(b.N))
	}
	b.StopTimer()
	return xc, yc, published
}

// processCPU is the CPU this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench EffectsCostBounds -benchtime 2000x: BenchmarkEffectsCost, and
// BenchmarkEffectsCostOfUpdates, with the effects cut down to one
// payload-status row and no remediation, the least an outbox writes for
// an upload whose request id asks for its statuses.
func BenchmarkEffectsCostBounds(b *testing.B) {
	oneStatus := func(e *Effects) { e.Remediation, e.PayloadStatus = nil, e.PayloadStatus[:1] }
	b.Run("one-status-alone", func(b *testing.B) { benchmarkEffectsCost(b, oneStatus, false) })
	b.Run("one-status-alone-update", func(b *testing.B) { benchmarkEffectsCost(b, oneStatus, true) })
}
