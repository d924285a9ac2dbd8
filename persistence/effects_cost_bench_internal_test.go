package persistence

import (
	"context"
	"slices"
	"sync"
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
func BenchmarkEffectsCost(b *testing.B) { benchmarkEffectsCost(b, nil) }

// benchmarkEffectsCost is BenchmarkEffectsCost with each event's effects
// passed through shape first, when it is set.
func benchmarkEffectsCost(b *testing.B, shape func(*Effects)) {
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
	write := func(n int, effects bool) error {
		events := make([][2]any, n)
		for i := range events {
			u, e := next()
			if !effects {
				e.Effects = nil
			} else if shape != nil {
				shape(e.Effects)
			}
			events[i] = [2]any{u, e}
		}
		return inParallel(pool.MaxOpen, n, 1, func(from, _ int) error {
			u, e := events[from][0].(SystemUpload), events[from][1].(Evaluation)
			check, err := s.CheckUpload(ctx, u)
			if err != nil {
				return err
			}
			_, err = s.StoreEvaluatedSystem(ctx, u, e, check)
			return err
		})
	}
	published := 0
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
	if err := write(64, true); err != nil {
		b.Fatal(err)
	}
	if err := drain(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var (
		on, off []float64
		onWAL   float64
		offWAL  float64
	)
	for _, effects := range []bool{true, false, false, true, true, false} {
		meter, err := startPGMeter(ctx, s.db)
		if err != nil {
			b.Fatal(err)
		}
		if effects {
			err = withRelay(func() error { return write(b.N, true) })
		} else {
			err = write(b.N, false)
		}
		if err != nil {
			b.Fatal(err)
		}
		cpu, wal, err := meter.stop(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ms := float64(cpu.Microseconds()) / 1000 / float64(b.N)
		if effects {
			on, onWAL = append(on, ms), onWAL+float64(wal)
		} else {
			off, offWAL = append(off, ms), offWAL+float64(wal)
		}
	}
	b.StopTimer()
	want := 3 // a remediation and two payload statuses
	if shape != nil {
		want = 1
	}
	if published < want*3*b.N {
		b.Fatalf("the relay published %d messages for %d events with effects, want at least %d each", published, 3*b.N, want)
	}
	floor := make([]float64, len(on))
	for i := range on {
		floor[i] = on[i] - off[i]
	}
	b.ReportMetric(median(off), "off-pg-ms/event")
	b.ReportMetric(median(on), "on-pg-ms/event")
	b.ReportMetric(median(floor), "floor-pg-ms/event")
	b.ReportMetric(median(off)/9, "allowance-pg-ms/event")
	b.ReportMetric(offWAL/float64(3*b.N), "off-WAL-bytes/event")
	b.ReportMetric(onWAL/float64(3*b.N), "on-WAL-bytes/event")
	b.ReportMetric(float64(published)/float64(3*b.N), "messages/event")
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
// -bench EffectsCostBounds -benchtime 2000x: BenchmarkEffectsCost with the
// effects cut down to what two designs that would move the floor still
// write, so that their gain is bounded before either is built:
//   - small-remediation: the remediation message a few bytes (the relay
//     rendering the host's state at publish time would store no payload,
//     but would add the updates' ids to the system row and the rendering's
//     reads, which this leaves out);
//   - small-remediation-one-status: that, and an upload's two payload
//     statuses in one row;
//   - one-status-alone: no remediation and one status row, the least an
//     outbox writes for an upload whose request id asks for its statuses.
func BenchmarkEffectsCostBounds(b *testing.B) {
	small := func(e *Effects) []byte { return []byte(`{"host_id":"` + e.PayloadStatus[0].EventID + `"}`) }
	b.Run("small-remediation", func(b *testing.B) {
		benchmarkEffectsCost(b, func(e *Effects) { e.Remediation = small(e) })
	})
	b.Run("small-remediation-one-status", func(b *testing.B) {
		benchmarkEffectsCost(b, func(e *Effects) { e.Remediation, e.PayloadStatus = small(e), e.PayloadStatus[:1] })
	})
	b.Run("one-status-alone", func(b *testing.B) {
		benchmarkEffectsCost(b, func(e *Effects) { e.Remediation, e.PayloadStatus = nil, e.PayloadStatus[:1] })
	})
}
