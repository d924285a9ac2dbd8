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

// Three bad records (one at the head of each of three partitions) whose
// handler fails naming a dependency it does not report (inventory: their
// own data trips it), among endless good records the handler handles.
// Each bad record's case hears the other two failing there: that is two
// bad records or an outage of a service only some records need, and the
// records handled say nothing of it, so they are held (reported) or, once
// only one other fails there, dead-lettered. They were neither: each
// failure Shared, inventory put in outage, retried for ever, silently. The
// same with errors naming nothing but saying a connection could not be
// made (each bad record's own endpoint refuses: dependency "network").
func TestShapeThreeBadRecordsNamingAnUnreportedDependencyAreHeldOrDead(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"inventory", messages.FailedIn("inventory", messages.Transient(errors.New("inventory: 500 Internal Server Error")))},
		{"network", fmt.Errorf("fetch host profile: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})},
	} {
		t.Run(c.name, func(t *testing.T) { threeBadRecordsNaming(t, c.err) })
	}
}

func threeBadRecordsNaming(t *testing.T, badErr error) {
	s := shapeSettings(ordering.ByKey)
	bad := func(p int32, off int64) bool { return off == 0 && p < 3 }
	endless := func(p int32, off int64) (string, bool) { return fmt.Sprintf("host-%d-%d", p, off), true }
	w := newShapeWorld(t, s, 4, endless, paced(func(w *shapeWorld, ctx context.Context, r *messages.Record) error {
		if bad(r.GetPartition(), r.GetOffset()) {
			return badErr
		}
		return w.call(ctx, messages.DependencyDatabase, true)
	}))
	// Sample each bad record's partition: is it held (reported)?
	samples, heldSamples := 0, [3]int{}
	for end := time.Now().Add(s.OwnFailureBound() + time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		samples++
		for p := 0; p < 3; p++ {
			if w.parts[p].pa.State().Held > 0 {
				heldSamples[p]++
			}
		}
	}
	st := w.stats.Snapshot()
	for p := int32(0); p < 3; p++ {
		t.Logf("p%d dead=%v attempts=%d own=%d shared=%d held=%d", p, !w.deadLettered(p, 0).IsZero(), w.attemptsOf(p, 0), st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
	}
	for p := int32(0); p < 3; p++ {
		if w.deadLettered(p, 0).IsZero() && heldSamples[p] < samples/2 {
			t.Errorf("bad record 0 of partition %d: not dead-lettered within %v, and held in only %d of %d samples: %d attempts; verdicts (all records) own %d, shared %d, held %d",
				p, s.OwnFailureBound()+time.Second, heldSamples[p], samples, w.attemptsOf(p, 0), st.RetriedOwn, st.RetriedShared, st.RetriedHeld)
		}
	}
}
