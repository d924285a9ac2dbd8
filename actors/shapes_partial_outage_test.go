package actors_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// refused is the error a dial to a service that is down returns.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// A handler whose calls to a dependency only some records need (one in 300:
// a rare event type; the rest touch only the database) fail through a 2 s
// outage, while the other records keep being handled, four and more for
// each failing. Judged by those alone, every failure read as its record's
// own, and every good record that needed the dependency was dead-lettered
// (177 of them). A failure that could not connect is never a record's own,
// named or not (the first failing record alone, with no other failing near
// it, was dead-lettered now and then while that was judged by the records
// handled). One whose error was flattened to text is judged by the other
// failures naming its dependency: here the records needing it come two at
// a time, each the other's evidence (one alone is the rule's known blind
// spot: docs/architecture.md, "What it cannot tell apart").
func TestShapeOutageOfADependencyOnlySomeRecordsNeed(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		needs  func(off int64) bool
		window time.Duration // the evidence window, when not the shapes' 150 ms
	}{
		{"plain error, could not connect", fmt.Errorf("fetch profile: %w", refused()),
			func(off int64) bool { return off%300 == 0 }, 0},
		{"named, could not connect", messages.FailedIn("inventory", messages.Transient(fmt.Errorf("inventory: %w", refused()))),
			func(off int64) bool { return off%300 == 0 }, 0},
		{"named, flattened to text", messages.FailedIn("inventory",
			messages.Transient(errors.New("inventory: dial tcp 10.0.0.9:443: connect: connection refused"))),
			// A pair's records fail within the first third of each
			// other's windows only if a retry (backoff, the handler, the
			// actors' hops) fits in it: 50 ms did not always under load.
			func(off int64) bool { return off%300 <= 1 }, 600 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := shapeSettings(ordering.ByKey)
			s.InFlightPerPartition, s.SpanPerPartition = 64, 4096 // the listener's S, a span that does not stop the flow
			if c.window > 0 {
				s.EvidenceWindow = c.window
			}
			start := time.Now()
			outage := func() bool { d := time.Since(start); return d > 200*time.Millisecond && d < 2200*time.Millisecond }
			endless := func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), true }
			w := newShapeWorld(t, s, 4, endless, paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
				time.Sleep(5 * time.Millisecond)
				if c.needs(r.GetOffset()) && outage() {
					return c.err
				}
				return nil
			}))
			time.Sleep(3 * time.Second)
			st := w.stats.Snapshot()
			if d := w.deadCount(); d != 0 {
				t.Fatalf("%d good records dead-lettered by a 2 s outage of a dependency few of them need (verdicts own %d, shared %d, held %d)",
					d, st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
			}
		})
	}
}

// One record, the only one needing a service, cannot connect to it while
// the records around it are handled: however many attempts fail so, it is
// held (reported), never dead-lettered, and handled once the service is
// back. Judged by the records handled, its failures were its own, and it
// was dead-lettered at its third attempt.
func TestShapeALoneRecordThatCannotConnectIsHeld(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"plain error", fmt.Errorf("fetch profile: %w", refused())},
		{"named dependency", messages.FailedIn("inventory", messages.Transient(fmt.Errorf("inventory: %w", refused())))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := shapeSettings(ordering.ByKey)
			s.InFlightPerPartition, s.SpanPerPartition = 64, 4096
			const lone, downFor = 300, 2 * 3 // the service is back after twice MaxAttempts failures
			var failures atomic.Int32
			endless := func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), true }
			w := newShapeWorld(t, s, 2, endless, paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
				if r.GetPartition() == 0 && r.GetOffset() == lone && failures.Load() < downFor {
					failures.Add(1)
					return c.err
				}
				return nil
			}))
			// Ends when the record is handled or dead-lettered, or at the
			// deadline: its attempts are backoff and verdicts apart (tens
			// of milliseconds each).
			deadline := time.Now().Add(20 * time.Second)
			for !w.isDone(0, lone) && w.deadLettered(0, lone).IsZero() && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			st := w.stats.Snapshot()
			if d := w.deadOf(0, lone); d != nil {
				t.Fatalf("a lone record that could not connect was dead-lettered after %d attempts (verdicts own %d, shared %d, held %d): %s",
					w.attemptsOf(0, lone), st.RetriedOwn, st.RetriedShared, st.RetriedHeld, d.GetError())
			}
			if !w.isDone(0, lone) {
				t.Fatalf("the lone record was not handled within 20 s of the service coming back: %d attempts", w.attemptsOf(0, lone))
			}
			if st.RetriedHeld == 0 || st.RetriedOwn != 0 {
				t.Fatalf("verdicts own %d, held %d: want its failures held, none its own", st.RetriedOwn, st.RetriedHeld)
			}
			w.waitCommitted(0, lone+1, 5*time.Second)
		})
	}
}

// A hanging record whose attempt ends in a dial (the handler calls on after
// its context ended) is a bad record: the dial fails on the attempt's
// deadline, which is no failure to connect, and the record is dead-lettered
// within the bound. Counted as could not connect, it was held for ever.
func TestShapeAHangingRecordEndingInADialIsDeadLettered(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	s.InFlightPerPartition, s.SpanPerPartition = 64, 4096
	const bad = 300
	endless := func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), true }
	w := newShapeWorld(t, s, 2, endless, paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if r.GetPartition() != 0 || r.GetOffset() != bad {
			return nil
		}
		<-ctx.Done()
		if _, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:1"); err != nil {
			return fmt.Errorf("fetch profile: %w", err)
		}
		return errors.New("dialled a closed port")
	}))
	w.waitDead(0, bad, 2*s.OwnFailureBound())
}
