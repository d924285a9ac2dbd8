package actors_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// stubbornHandler holds each record's weight while its Handle runs, and
// ignores its context on the first delivery of offset 0: it returns only
// when the test lets it.
type stubbornHandler struct {
	weight           int64
	let              chan struct{}
	calls            atomic.Int64
	bytes, peakBytes atomic.Int64
}

func (h *stubbornHandler) RecordBytes(*messages.Record) int64 { return h.weight }

func (h *stubbornHandler) Handle(ctx context.Context, r *messages.Record) error {
	raise(&h.peakBytes, h.bytes.Add(h.weight))
	defer h.bytes.Add(-h.weight)
	if h.calls.Add(1) == 1 {
		<-h.let // the call that does not return at its cancellation
		return ctx.Err()
	}
	return nil
}

// A drain that times out abandons the records whose handlers still run, and
// gives their bytes back, though what the handlers hold stays alive until
// they return: the next claim (here the same partition coming back, in a
// rebalance) is admitted over it, and the memory of the records in flight
// passes the budget. Bytes come back when the memory does: once the
// abandoned handler has returned.
func TestByteBudgetHoldsTheBytesOfAbandonedHandlers(t *testing.T) {
	s := testSettings(ordering.ByKey)
	s.InFlightBytes = 1000
	s.DrainTimeout = 200 * time.Millisecond
	h := &stubbornHandler{weight: 600, let: make(chan struct{})}
	defer close(h.let)
	b := newTestBridge(t, s, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := &recordingMarker{}
	sess := &fakeSession{ctx: ctx, marker: marker}

	first := newFakeClaim(t, 0, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.ConsumeClaim(sess, first)
	}()
	waitFor(t, "the first delivery to run", func() bool { return h.calls.Load() == 1 })
	first.close() // revoked: the drain times out, the handler still runs
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the first claim did not end")
	}

	again := newFakeClaim(t, 0, 1) // the partition back, its record redelivered
	var wg sync.WaitGroup
	wg.Go(func() { _ = b.ConsumeClaim(sess, again) })
	time.Sleep(200 * time.Millisecond) // every chance to overshoot
	peak := h.peakBytes.Load()
	cancel()
	again.close()
	h.let <- struct{}{}
	wg.Wait()
	waitFor(t, "every byte back once the abandoned handler returned", func() bool { return b.Credits().Bytes == 0 })
	if peak > s.InFlightBytes {
		t.Fatalf("%d bytes were in handlers at once, the budget is %d: the abandoned handler's %d came back while it ran",
			peak, s.InFlightBytes, h.weight)
	}
}

var _ actors.RecordSizer = (*stubbornHandler)(nil)
