package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// The database's writes hang for everyone (past the attempt's deadline)
// while its reads, and a health check that reads, are served: a check that
// misses the failing path. Three records, one per partition, each reading
// (served) then hanging at its write. The others are failing there still,
// heard or not (hanging past the window, or waiting between attempts), so
// a passing check does not make a failure Own: held, not dead-lettered.
// Counted as nothing, they let the check dead-letter all three, at both
// deadlines (longer and shorter than the window).
func TestShapeWritesHangingBesideAPassingReadCheckDeadLetterNothing(t *testing.T) {
	for _, timeout := range []time.Duration{400 * time.Millisecond, 60 * time.Millisecond} {
		t.Run(timeout.String(), func(t *testing.T) { writesHangingBesideAPassingReadCheck(t, timeout) })
	}
}

func writesHangingBesideAPassingReadCheck(t *testing.T, timeout time.Duration) {
	s := shapeSettings(ordering.ByKey)
	s.AttemptTimeout = timeout
	w := newShapeWorld(t, s, 3, distinctKeys(1), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if err := w.call(ctx, messages.DependencyDatabase, true); err != nil { // read
			return err
		}
		began := time.Now()
		<-ctx.Done() // write: hangs, for every record
		w.deps.Observe(ctx, messages.DependencyDatabase, time.Since(began), false)
		return messages.FailedIn(messages.DependencyDatabase, messages.Transient(fmt.Errorf("database: write: %w", ctx.Err())))
	})
	w.check(messages.DependencyDatabase, 50*time.Millisecond, func() bool { return true }) // SELECT 1: served
	time.Sleep(3 * time.Second)
	st := w.stats.Snapshot()
	if d := w.deadCount(); d != 0 {
		t.Fatalf("%d of 3 good records dead-lettered by writes hanging for every record (verdicts own %d, shared %d, held %d)",
			d, st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
	}
}
