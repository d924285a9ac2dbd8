package actors_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A handler returning errors that name no dependency but say a connection
// could not be made, or that name a dependency whose calls it does not
// report, through a 2 s outage of a dependency only some records need (one
// in 300: a rare event type; the rest touch only the database). The other
// records keep being handled, four and more for each failing: judged by
// those alone, every failure read as its record's own, and every good
// record that needed the dependency was dead-lettered (177 of them). The
// other failures naming the same dependency make it shared.
func TestShapeOutageOfADependencyOnlySomeRecordsNeed(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"plain error", fmt.Errorf("fetch profile: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})},
		{"named, unreported dependency", messages.FailedIn("inventory",
			messages.Transient(errors.New("inventory: dial tcp 10.0.0.9:443: connect: connection refused")))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := shapeSettings(ordering.ByKey)
			s.InFlightPerPartition, s.SpanPerPartition = 64, 4096 // the listener's S, a span that does not stop the flow
			start := time.Now()
			outage := func() bool { d := time.Since(start); return d > 200*time.Millisecond && d < 2200*time.Millisecond }
			needs := func(off int64) bool { return off%300 == 0 }
			endless := func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), true }
			w := newShapeWorld(t, s, 4, endless, paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
				time.Sleep(5 * time.Millisecond)
				if needs(r.GetOffset()) && outage() {
					return c.err
				}
				return nil
			}))
			time.Sleep(3 * time.Second)
			st := w.stats.Snapshot()
			if d := w.deadCount(); d != 0 {
				t.Fatalf("%d good records dead-lettered by a 2 s outage of a dependency one in 300 of them need (verdicts own %d, shared %d, held %d)",
					d, st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
			}
		})
	}
}
