package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// One record whose VMaaS call hangs until the attempt deadline, alone on a
// quiet topic, VMaaS's check passing every 50 ms, the attempt timeout ten
// times the evidence window (as by default: 2 min against 1.5 s), the hung
// call reported with its real duration, as a domain does: dead-lettered
// within Settings.OwnFailureBound. Its own calls, the only calls to VMaaS,
// had set the dependency's mean call time to the attempt timeout and
// stretched every case's window to twice it (7.9 s against a bound of
// 4.95 s; about 15 min against 10 min 50 s with the defaults); and with the
// backoff under the window, its last verdict came during an attempt more.
func TestShapeHangingRecordsOwnCallsDoNotStretchItsWindow(t *testing.T) {
	s := shapeSettings(ordering.ByKey)
	s.AttemptTimeout = 1500 * time.Millisecond
	s.BackoffMax = 100 * time.Millisecond
	w := newShapeWorld(t, s, 1, distinctKeys(1), func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		start := time.Now()
		<-ctx.Done()
		w.deps.Observe(ctx, "vmaas", time.Since(start), false)
		return messages.FailedIn("vmaas", messages.Transient(fmt.Errorf("vmaas: %w", ctx.Err())))
	})
	w.check("vmaas", 50*time.Millisecond, func() bool { return true })
	deadline := w.started.Add(4 * s.OwnFailureBound())
	for w.deadLettered(0, 0).IsZero() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if took := w.deadLettered(0, 0).Sub(w.started); w.deadLettered(0, 0).IsZero() || took > s.OwnFailureBound()+time.Second {
		st := w.stats.Snapshot()
		t.Fatalf("dead-lettered after %v (zero: not within %v); the bound is %v; %d attempts, own %d verdicts",
			took.Round(time.Millisecond), 4*s.OwnFailureBound(), s.OwnFailureBound(), w.attemptsOf(0, 0), st.RetriedOwn)
	}
}
