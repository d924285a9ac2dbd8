package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A claim waiting for bytes ends at once when sarama revokes it, and at once
// when the session ends, whatever holds the budget.
func TestByteBudgetWaitEndsWithTheClaim(t *testing.T) {
	for _, end := range []string{"revoke", "session"} {
		t.Run(end, func(t *testing.T) {
			var wg sync.WaitGroup
			defer wg.Wait() // last: after the handler and both sessions are let go
			s := testSettings(ordering.ByKey)
			s.InFlightBytes = 1000
			h := &sizedHandler{gatedHandler: gatedHandler{release: make(chan struct{}), honourCtx: true},
				sizes: func(*messages.Record) int64 { return 600 }}
			var once sync.Once
			let := func() { once.Do(func() { close(h.release) }) }
			defer let()
			b := newTestBridge(t, s, h)
			holdCtx, stopHold := context.WithCancel(context.Background())
			defer stopHold()
			waitCtx, endSession := context.WithCancel(context.Background())
			defer endSession()
			holder := newFakeClaim(t, 0, 1)
			wg.Go(func() { _ = b.ConsumeClaim(&fakeSession{ctx: holdCtx, marker: &recordingMarker{}}, holder) })
			waitFor(t, "the holder's record to run", func() bool { return h.running.Load() == 1 })
			waiter := newFakeClaim(t, 1, 1)
			ended := make(chan time.Time, 1)
			wg.Go(func() {
				_ = b.ConsumeClaim(&fakeSession{ctx: waitCtx, marker: &recordingMarker{}}, waiter)
				ended <- time.Now()
			})
			waitFor(t, "the second claim to wait for bytes", func() bool {
				for _, p := range b.Partitions() {
					if p.Partition == 1 && !p.WaitingForCredit.IsZero() {
						return true
					}
				}
				return false
			})
			start := time.Now()
			if end == "revoke" {
				waiter.close()
			} else {
				endSession()
			}
			select {
			case at := <-ended:
				if took := at.Sub(start); took > time.Second {
					t.Fatalf("the claim waiting for bytes took %v to end", took)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the claim waiting for bytes did not end")
			}
			if st := b.Credits(); st.Bytes != 600 || st.Held != 1 {
				t.Fatalf("after the waiting claim ended: %+v; want the holder's 600 bytes and 1 credit", st)
			}
			let()
			stopHold()
			holder.close()
		})
	}
}
