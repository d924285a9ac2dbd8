package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// Two bad records on two partitions, each at the head of its partition,
// whose handlers read the database (served) before their write fails, as a
// handler with a locked row or a bad statement does; other records read and
// write fine. Each bad record is a suspect in the other's cases, and its
// served read is heard first; admitted together, they retry in lockstep.
// A suspect's read counts as a recovery only once its attempt got past the
// database: taken at once, it had each blind the other for ever.
func TestShapeTwoBadRecordsReadingFirstDoNotBlindEachOther(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	bad := func(p int32, off int64) bool { return off == 0 }
	w := newShapeWorld(t, s, 2, distinctKeys(100), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if err := w.call(ctx, messages.DependencyDatabase, true); err != nil { // read
			return err
		}
		return w.call(ctx, messages.DependencyDatabase, !bad(r.GetPartition(), r.GetOffset())) // write
	})
	w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
	w.waitDead(1, 0, s.OwnFailureBound()+time.Second)
}

// The same in partition order with two partitions and a passing check on
// the records' path (TestShapeTwoBadRecordsInPartitionOrderWithACheck, but
// the handler reads before it writes).
func TestShapeTwoBadRecordsReadingFirstInPartitionOrder(t *testing.T) {
	s := shapeSettings(ordering.ByPartition)
	bad := func(p int32, off int64) bool { return off == 0 }
	w := newShapeWorld(t, s, 2, distinctKeys(20), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if err := w.call(ctx, messages.DependencyDatabase, true); err != nil { // read
			return err
		}
		return w.call(ctx, messages.DependencyDatabase, !bad(r.GetPartition(), r.GetOffset())) // write
	})
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return true })
	w.waitDead(0, 0, s.OwnFailureBound()+time.Second)
	w.waitDead(1, 0, s.OwnFailureBound()+time.Second)
}

// Two bad records alone on a quiet topic (one record on each of two
// partitions), the check on the records' path passing, each handler reading
// (served) before its write fails: dead-lettered, since one other failing
// beside a passing check is Own. They were neither dead-lettered nor held:
// every failure judged Shared, retried for ever.
func TestShapeTwoLoneBadRecordsReadingFirstAreDeadLettered(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	w := newShapeWorld(t, s, 2, distinctKeys(1), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if err := w.call(ctx, messages.DependencyDatabase, true); err != nil { // read
			return err
		}
		return w.call(ctx, messages.DependencyDatabase, false) // write
	})
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return true })
	deadline := w.started.Add(3 * s.OwnFailureBound())
	for time.Now().Before(deadline) {
		if !w.deadLettered(0, 0).IsZero() && !w.deadLettered(1, 0).IsZero() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := w.stats.Snapshot()
	t.Fatalf("after %v: dead-lettered %v/%v, held %d/%d; verdicts own %d, shared %d, held %d",
		3*s.OwnFailureBound(), !w.deadLettered(0, 0).IsZero(), !w.deadLettered(1, 0).IsZero(),
		w.parts[0].pa.State().Held, w.parts[1].pa.State().Held, st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
}

// The partition-order shape at the listener's default proportions (÷10:
// backoff 10 ms to 1 s, window 150 ms, five attempts).
func TestShapeTwoBadRecordsReadingFirstAtDefaultProportions(t *testing.T) {
	s := shapeSettings(ordering.ByPartition)
	s.MaxAttempts = 5
	s.BackoffMin, s.BackoffMax = 10*time.Millisecond, time.Second
	bad := func(p int32, off int64) bool { return off == 0 }
	w := newShapeWorld(t, s, 2, distinctKeys(20), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if err := w.call(ctx, messages.DependencyDatabase, true); err != nil { // read
			return err
		}
		return w.call(ctx, messages.DependencyDatabase, !bad(r.GetPartition(), r.GetOffset())) // write
	})
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return true })
	w.waitDead(0, 0, 2*s.OwnFailureBound())
	w.waitDead(1, 0, 2*s.OwnFailureBound())
}

// The lockstep at other backoff caps (window 150 ms, backoff from 10 ms,
// five attempts: the condition the docs state, BackoffMin × (2^4 − 1) =
// 150 ms over a third of the window, holds for each); caps under the window
// were where the records blinded each other.
func TestShapeTwoBadRecordsReadingFirstByBackoffCap(t *testing.T) {
	for _, cap := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		t.Run(cap.String(), func(t *testing.T) {
			s := shapeSettings(ordering.ByPartition)
			s.MaxAttempts = 5
			s.BackoffMin, s.BackoffMax = 10*time.Millisecond, cap
			bad := func(p int32, off int64) bool { return off == 0 }
			w := newShapeWorld(t, s, 2, distinctKeys(20), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
				if err := w.call(ctx, messages.DependencyDatabase, true); err != nil { // read
					return err
				}
				return w.call(ctx, messages.DependencyDatabase, !bad(r.GetPartition(), r.GetOffset())) // write
			})
			w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return true })
			w.waitDead(0, 0, 2*s.OwnFailureBound())
			w.waitDead(1, 0, 2*s.OwnFailureBound())
		})
	}
}
