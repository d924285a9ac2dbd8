package persistence

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// PATCHFLOW_PG_DURABLE=1 .ci/postgres with go test ./persistence -run '^$'
// -bench EffectsCost -benchtime 2000x: where PostgreSQL's CPU for the
// effects goes. New hosts (newBenchHosts) are written by 8 writers without
// their effects, then with them; then one relay claims the outbox those
// wrote, 500 messages a round as the listener's does, and settles each
// round as published (deleting its rows). Each phase reports the CPU of
// every PostgreSQL process and the WAL, per event written.
func BenchmarkEffectsCost(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(b), DefaultPoolSettings())
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
			}
			events[i] = [2]any{u, e}
		}
		return inParallel(8, n, 1, func(from, _ int) error {
			u, e := events[from][0].(SystemUpload), events[from][1].(Evaluation)
			_, err := s.StoreEvaluatedSystem(ctx, u, e, UploadCheck{Apply: true, absent: true})
			return err
		})
	}
	relay := func() (int, error) {
		n := 0
		for {
			msgs, finish, err := o.Claim(ctx, 500, nil)
			if err != nil {
				return n, err
			}
			out := messages.OutboxOutcome{}
			for _, m := range msgs {
				out.Published = append(out.Published, m.ID)
			}
			if err := finish(ctx, out); err != nil {
				return n, err
			}
			if len(msgs) == 0 {
				return n, nil
			}
			n += len(msgs)
		}
	}
	// Warm the id cache and the tables, and empty the outbox.
	if err := write(64, true); err != nil {
		b.Fatal(err)
	}
	if _, err := relay(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var published int
	for _, phase := range []string{"write-off", "write-on", "relay"} {
		meter, err := startPGMeter(ctx, s.db)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		switch phase {
		case "write-off":
			err = write(b.N, false)
		case "write-on":
			err = write(b.N, true)
		case "relay":
			published, err = relay()
		}
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		cpu, wal, err := meter.stop(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := float64(b.N)
		b.ReportMetric(float64(cpu.Microseconds())/1000/n, phase+"-pg-ms/event")
		b.ReportMetric(float64(wal)/n, phase+"-WAL-bytes/event")
		b.ReportMetric(took.Seconds()*1000/n, phase+"-wall-ms/event")
	}
	b.StopTimer()
	if published < 3*b.N {
		b.Fatalf("the relay published %d messages for %d events with effects, want at least 3 each", published, b.N)
	}
	b.ReportMetric(float64(published)/float64(b.N), "messages/event")
}
