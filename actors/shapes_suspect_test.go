package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A bad record A fails at the database every attempt, while the database's
// check (on the records' path) passes, on a quiet topic. Another record B
// failed once at the database (a blip on its first attempt) and since then
// reads the database (served) and fails at VMaaS, which nobody else calls:
// B is held. A is dead-lettered: B's run of failures at the database ended
// when its attempt got past it, so its reads are a fresh record's. B stayed
// a suspect there for as long as it lived, each read "a recovery" in A's
// cases: A was Shared for ever.
func TestShapeARecordOnceFailingThereDoesNotBlindABadRecord(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	w := newShapeWorld(t, s, 2, distinctKeys(1), paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		switch {
		case r.GetPartition() == 0 && r.GetOffset() == 0: // A: bad at the database
			return w.call(ctx, messages.DependencyDatabase, false)
		case r.GetPartition() == 1 && r.GetOffset() == 0: // B
			if w.attemptsOf(1, 0) == 1 {
				return w.call(ctx, messages.DependencyDatabase, false) // a blip
			}
			if err := w.call(ctx, messages.DependencyDatabase, true); err != nil {
				return err
			}
			return w.call(ctx, "vmaas", false)
		}
		return w.call(ctx, messages.DependencyDatabase, true)
	}))
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return true }) // on the records' path, passing
	bound := s.OwnFailureBound() + time.Second
	deadline := w.started.Add(bound)
	for w.deadLettered(0, 0).IsZero() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st := w.stats.Snapshot()
	if w.deadLettered(0, 0).IsZero() {
		t.Fatalf("bad record A not dead-lettered within %v: %d attempts, held %v; B %d attempts, held %v, dead %v; verdicts (all) own %d, shared %d, held %d",
			bound, w.attemptsOf(0, 0), w.parts[0].pa.State().Held > 0, w.attemptsOf(1, 0), w.parts[1].pa.State().Held > 0,
			!w.deadLettered(1, 0).IsZero(), st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
	}
}
