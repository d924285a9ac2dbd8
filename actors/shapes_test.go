package actors_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// The retry rule's shapes (docs/architecture.md, "Whose failure"): one test
// per shape where the rule used to break, each with real timing at test
// speed (shapeSettings). A record failing on its own is dead-lettered within
// Settings.OwnFailureBound once evidence exists; an outage dead-letters
// nothing; a record nothing can judge is held and reported.

// topic of n records per partition, each of a key of its own.
func distinctKeys(n int64) func(p int32, off int64) (string, bool) {
	return func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), off < n }
}

// busyElsewhere is a topic whose partition 0 holds n records and whose other
// partitions never run dry (records keep coming for as long as the test
// runs), each record of a key of its own.
func busyElsewhere(n int64) func(p int32, off int64) (string, bool) {
	return func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), p != 0 || off < n }
}

// paced makes each record take a millisecond, so that an endless partition
// keeps its records coming at a steady pace.
func paced(h shapeHandler) shapeHandler {
	return func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		time.Sleep(time.Millisecond)
		return h(w, ctx, r)
	}
}

// vmaasUnless is a handler whose VMaaS call is served, except for the
// records bad names: those fail (hang until the attempt's deadline, when
// hang is set, else a 503 at once).
func vmaasUnless(bad func(p int32, off int64) bool, hang bool) shapeHandler {
	return func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if !bad(r.GetPartition(), r.GetOffset()) {
			return w.call(ctx, "vmaas", true)
		}
		if hang {
			<-ctx.Done()
			w.deps.Observe(ctx, "vmaas", time.Millisecond, false)
			return messages.FailedIn("vmaas", messages.Transient(fmt.Errorf("vmaas: %w", ctx.Err())))
		}
		return w.call(ctx, "vmaas", false)
	}
}

func at(p int32, off int64) func(int32, int64) bool {
	return func(q int32, o int64) bool { return q == p && o == off }
}

// One record whose VMaaS call hangs, at the head of a partition that fills
// its span behind it, VMaaS serving every other call: once the span is full
// nothing else of the partition runs, so the record lends a few offsets past
// it; their calls are the evidence. Before: tried 28 times in 9 s, never
// dead-lettered.
func TestShapeHangingRecordAtTheHeadOfAFullSpan(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	w := newShapeWorld(t, s, 1, distinctKeys(200), vmaasUnless(at(0, 0), true))
	w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
	w.waitCommitted(0, 200, 5*time.Second)
	if ahead, most := w.parts[0].ahead.Load(), int64(s.Span()+s.EvidenceOverdraft()); ahead >= most {
		t.Fatalf("admitted %d offsets past the watermark; the span and its overdraft are %d", ahead, most)
	}
	if st := w.stats.Snapshot(); st.EvidenceLent == 0 || w.deadCount() != 1 {
		t.Fatalf("evidence lent %d, dead letters %d; want some lent, one dead letter", st.EvidenceLent, w.deadCount())
	}
	if l := w.deadOf(0, 0); l.GetOwnFailures() != int32(s.MaxAttempts) {
		t.Fatalf("dead letter with %d own failures, want %d", l.GetOwnFailures(), s.MaxAttempts)
	}
}

// Partition order, the failing record at the head of its partition: nothing
// of its partition may run, so the other partitions of the process are its
// evidence. Before: 0 of 10 failures counted as its own.
func TestShapePartitionOrderHeadFailing(t *testing.T) {
	s := shapeSettings(ordering.ByPartition)
	w := newShapeWorld(t, s, 4, busyElsewhere(50), paced(vmaasUnless(at(0, 0), false)))
	w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
	w.waitCommitted(0, 50, 10*time.Second)
	if n := w.deadCount(); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
}

// Two bad records on two partitions, each blocking its own (its span full):
// each one's failures must not read as evidence of an outage for the other.
// Before: never dead-lettered in 3 of 7 runs.
func TestShapeTwoBadRecordsDoNotBlindEachOther(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	bad := func(p int32, off int64) bool { return off == 0 }
	w := newShapeWorld(t, s, 2, distinctKeys(100), vmaasUnless(bad, true))
	w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
	w.waitDead(1, 0, s.OwnFailureBound()+time.Second)
	w.waitCommitted(0, 100, 5*time.Second)
	w.waitCommitted(1, 100, 5*time.Second)
	if n := w.deadCount(); n != 2 {
		t.Fatalf("%d dead letters, want 2", n)
	}
}

// The same in partition order, where nothing else of either partition may
// run and no third partition exists: VMaaS's health check (a real /updates
// call) passing is the evidence; one other record failing beside it does
// not make it an outage.
func TestShapeTwoBadRecordsInPartitionOrderWithACheck(t *testing.T) {
	s := shapeSettings(ordering.ByPartition)
	bad := func(p int32, off int64) bool { return off == 0 }
	w := newShapeWorld(t, s, 2, distinctKeys(20), vmaasUnless(bad, false))
	w.check("vmaas", 50*time.Millisecond, func() bool { return true })
	w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
	w.waitDead(1, 0, s.OwnFailureBound()+time.Second)
	w.waitCommitted(0, 20, 5*time.Second)
	w.waitCommitted(1, 20, 5*time.Second)
}

// A failure naming no dependency, or one nobody reports (inventory), in
// partition order with records waiting behind it: judged by the handler's
// own outcomes, the other partitions' records handled. Before: retried
// without end, 0 counted as own, the partition stuck for good.
func TestShapeUnnamedFailureInPartitionOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"no dependency", errors.New("lock timeout")},
		{"unreported dependency", messages.FailedIn("inventory", messages.Transient(errors.New("inventory: 503")))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := shapeSettings(ordering.ByPartition)
			w := newShapeWorld(t, s, 4, busyElsewhere(50), paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
				if r.GetPartition() == 0 && r.GetOffset() == 0 {
					return c.err
				}
				return nil
			}))
			w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
			w.waitCommitted(0, 50, 10*time.Second)
		})
	}
}

// One bad record on an otherwise idle topic, and no health check of its
// dependency: nothing can tell its own trouble from an outage. It is held,
// retried and reported (a warning, PartitionState.Held), never
// dead-lettered; once a check of VMaaS passes, its failures are its own.
func TestShapeLoneRecordIsHeldUntilACheckPasses(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	w := newShapeWorld(t, s, 1, distinctKeys(1), vmaasUnless(at(0, 0), false))
	waitFor(t, "the record held", func() bool { return w.parts[0].pa.State().Held == 1 })
	time.Sleep(5 * s.EvidenceWindow) // held is not a step on the way to a dead letter
	if !w.deadLettered(0, 0).IsZero() || w.attemptsOf(0, 0) < 3 {
		t.Fatalf("dead-lettered %v after %d attempts with no evidence; want held and retried", !w.deadLettered(0, 0).IsZero(), w.attemptsOf(0, 0))
	}
	if w.logs.warned("record held") == 0 {
		t.Fatal("no warning that the record is held")
	}
	checked := time.Now()
	w.check("vmaas", 50*time.Millisecond, func() bool { return true })
	for w.deadLettered(0, 0).IsZero() {
		if time.Since(checked) > s.OwnFailureBound()+time.Second {
			t.Fatalf("not dead-lettered within %v of a passing check", s.OwnFailureBound()+time.Second)
		}
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, "no record held", func() bool { return w.parts[0].pa.State().Held == 0 })
}

// lockedTable is the database with its system table locked (a migration
// holding ACCESS EXCLUSIVE: every event's statement times out with 57014)
// until release; its health check reads and writes the same table.
type lockedTable struct{ until time.Time }

func (l lockedTable) locked() bool { return time.Now().Before(l.until) }

func (l lockedTable) handler(w *shapeWorld, ctx context.Context, _ *messages.Record) error {
	if l.locked() {
		w.deps.Observe(ctx, messages.DependencyDatabase, time.Millisecond, false)
		return messages.FailedIn(messages.DependencyDatabase, messages.Transient(errors.New("pq: canceling statement due to statement timeout (57014)")))
	}
	return w.call(ctx, messages.DependencyDatabase, true)
}

// The system table locked while few records are in flight (partition
// order, one partition): nothing is dead-lettered, since the check on the
// records' path fails too, and the records go on within a second of the
// release. Before (the check an empty query): 3 of 3 dead-lettered.
func TestShapeLockedTableFewRecords(t *testing.T) {
	s := shapeSettings(ordering.ByPartition)
	s.BackoffMax = 5 * time.Second // recovery, not the backoff, must wake them
	l := lockedTable{until: time.Now().Add(time.Second)}
	w := newShapeWorld(t, s, 1, distinctKeys(3), l.handler)
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return !l.locked() })
	w.waitCommitted(0, 3, time.Until(l.until)+time.Second)
	if n := w.deadCount(); n != 0 {
		t.Fatalf("%d records dead-lettered while the table was locked", n)
	}
}

// The same with eight busy partitions in key order.
func TestShapeLockedTableBusyPartitions(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	s.BackoffMax = 5 * time.Second
	l := lockedTable{until: time.Now().Add(time.Second)}
	w := newShapeWorld(t, s, 8, distinctKeys(100), l.handler)
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return !l.locked() })
	for p := range int32(8) {
		w.waitCommitted(p, 100, time.Until(l.until)+2*time.Second)
	}
	if n := w.deadCount(); n != 0 {
		t.Fatalf("%d records dead-lettered while the table was locked", n)
	}
}

// A handler returning plain errors (no class, no dependency), as most code
// does, through an outage of its dependency: only the records that fail
// after it too are dead-lettered. Before: 1,822 healthy records of 20,000
// dead-lettered beside the 400 bad.
func TestShapePlainErrorsThroughAnOutage(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	start := time.Now()
	outage := func() bool { d := time.Since(start); return d > 200*time.Millisecond && d < 1200*time.Millisecond }
	bad := func(p int32, off int64) bool { return off%50 == 7 }
	const n = 400
	w := newShapeWorld(t, s, 4, distinctKeys(n), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		time.Sleep(time.Millisecond) // a call takes a while
		if outage() {
			return errors.New("dial tcp 10.0.0.9:443: connect: connection refused")
		}
		if bad(r.GetPartition(), r.GetOffset()) {
			return errors.New("json: cannot unmarshal number into Go struct field")
		}
		return nil
	})
	for p := range int32(4) {
		w.waitCommitted(p, n, 20*time.Second)
	}
	for p := range int32(4) {
		for off := range int64(n) {
			if dead := !w.deadLettered(p, off).IsZero(); dead != bad(p, off) {
				t.Errorf("offset %d of partition %d: dead-lettered %v, bad %v (attempts %d)", off, p, dead, bad(p, off), w.attemptsOf(p, off))
			}
		}
	}
}

// When the dependency serves again, the records waiting out the outage
// retry at once, not at the end of their backoff (here up to 5 s). Before: a
// 10 s outage cost about 19 s of near-zero throughput.
func TestShapeRecoveryWakesTheWaiters(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	s.BackoffMax = 5 * time.Second
	up := time.Now().Add(time.Second)
	w := newShapeWorld(t, s, 2, distinctKeys(100), func(w *shapeWorld, ctx context.Context, _ *messages.Record) error {
		return w.call(ctx, "vmaas", time.Now().After(up))
	})
	w.check("vmaas", 200*time.Millisecond, func() bool { return time.Now().After(up) })
	for p := range int32(2) {
		w.waitCommitted(p, 100, time.Until(up)+5*time.Second)
	}
	t.Logf("every record finished %v after the recovery", time.Since(up).Round(time.Millisecond))
	if took := time.Since(up); took > time.Second {
		t.Fatalf("every record finished %v after the recovery; want within 1 s (the backoff is up to %v)", took.Round(time.Millisecond), s.BackoffMax)
	}
	if n := w.deadCount(); n != 0 {
		t.Fatalf("%d dead-lettered in the outage", n)
	}
}

// A handler that ignores its context and never returns: a warning once the
// attempt is past its deadline and a grace, naming the record, and the
// partition's Overdue count.
func TestShapeHandlerIgnoringItsContextIsReported(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	s.AttemptTimeout = 50 * time.Millisecond // grace: 1 s
	release := make(chan struct{})
	defer close(release)
	w := newShapeWorld(t, s, 1, distinctKeys(1), func(w *shapeWorld, ctx context.Context, _ *messages.Record) error {
		<-release // not ctx
		return nil
	})
	waitFor(t, "an overdue attempt counted", func() bool { return w.parts[0].pa.State().Overdue == 1 })
	if w.logs.warned("attempt overdue") != 1 {
		t.Fatalf("%d overdue warnings, want 1", w.logs.warned("attempt overdue"))
	}
}

// Bad records that arrive during an outage are not dead-lettered before it
// ends, and are within the bound after, while other records flow.
func TestShapeBadRecordsArrivingDuringAnOutage(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	up := time.Now().Add(time.Second)
	bad := func(p int32, off int64) bool { return off < 100 && off%20 == 3 }
	endless := func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), true }
	w := newShapeWorld(t, s, 2, endless, paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		return w.call(ctx, "vmaas", time.Now().After(up) && !bad(r.GetPartition(), r.GetOffset()))
	}))
	w.check("vmaas", 50*time.Millisecond, func() bool { return time.Now().After(up) })
	for p := range int32(2) {
		w.waitCommitted(p, 100, time.Until(up)+s.OwnFailureBound()+3*time.Second)
	}
	for p := range int32(2) {
		for off := range int64(100) {
			when := w.deadLettered(p, off)
			switch {
			case bad(p, off) && when.IsZero():
				t.Errorf("bad offset %d of partition %d not dead-lettered", off, p)
			case bad(p, off) && when.Before(up):
				t.Errorf("bad offset %d of partition %d dead-lettered during the outage", off, p)
			case bad(p, off) && when.Sub(up) > s.OwnFailureBound()+time.Second:
				t.Errorf("bad offset %d of partition %d dead-lettered %v after the outage; the bound is %v", off, p, when.Sub(up), s.OwnFailureBound())
			case !bad(p, off) && !when.IsZero():
				t.Errorf("good offset %d of partition %d dead-lettered", off, p)
			}
		}
	}
}

// A dependency shedding load (503 for half the calls, at random) fails
// records alike: no record's own fault, nothing dead-lettered.
func TestShapeLoadSheddingDeadLettersNothing(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	var calls atomic.Int64
	w := newShapeWorld(t, s, 4, distinctKeys(200), func(w *shapeWorld, ctx context.Context, _ *messages.Record) error {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return w.call(ctx, "vmaas", rand.IntN(2) == 0)
	})
	for p := range int32(4) {
		w.waitCommitted(p, 200, 30*time.Second)
	}
	if n := w.deadCount(); n != 0 {
		st := w.stats.Snapshot()
		t.Fatalf("%d records dead-lettered while VMaaS shed half of %d calls (verdicts: own %d, shared %d, held %d)",
			n, calls.Load(), st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
	}
}

// A dependency so slow that every call times out, for everyone: shared,
// nothing dead-lettered.
func TestShapeSlowDependencyForEveryone(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	fast := time.Now().Add(time.Second)
	w := newShapeWorld(t, s, 2, distinctKeys(50), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if time.Now().Before(fast) {
			return vmaasUnless(func(int32, int64) bool { return true }, true)(w, ctx, r)
		}
		return w.call(ctx, "vmaas", true)
	})
	for p := range int32(2) {
		w.waitCommitted(p, 50, time.Until(fast)+5*time.Second)
	}
	if n := w.deadCount(); n != 0 {
		t.Fatalf("%d records dead-lettered while VMaaS timed out for everyone", n)
	}
}

// Two dependencies, one down: the records failing at the database (down,
// its check failing) wait, never dead-lettered, holding the partition's
// credits; the bad records of VMaaS (up, its check passing) are
// dead-lettered meanwhile.
func TestShapeTwoDependenciesOneDown(t *testing.T) {
	s := shapeSettings(ordering.Unordered)
	up := time.Now().Add(1500 * time.Millisecond)
	needsDB := func(off int64) bool { return off%2 == 0 }
	badVMaaS := func(off int64) bool { return off == 5 }
	w := newShapeWorld(t, s, 2, distinctKeys(100), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		off := r.GetOffset()
		if needsDB(off) {
			return w.call(ctx, messages.DependencyDatabase, time.Now().After(up))
		}
		return w.call(ctx, "vmaas", !badVMaaS(off))
	})
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return time.Now().After(up) })
	w.check("vmaas", 50*time.Millisecond, func() bool { return true })
	// The records waiting on the database soon hold every credit, so
	// VMaaS's check is the evidence for its bad records, one per partition.
	waitFor(t, "the bad VMaaS records dead-lettered", func() bool { return w.deadCount() == 2 })
	if time.Now().After(up) {
		t.Fatal("the bad VMaaS records were dead-lettered only once the database came back")
	}
	for p := range int32(2) {
		w.waitCommitted(p, 100, time.Until(up)+s.OwnFailureBound()+3*time.Second)
	}
	for p := range int32(2) {
		for off := range int64(100) {
			if dead := !w.deadLettered(p, off).IsZero(); dead != badVMaaS(off) {
				t.Errorf("offset %d of partition %d: dead-lettered %v, a bad VMaaS record %v", off, p, dead, badVMaaS(off))
			}
		}
	}
}
