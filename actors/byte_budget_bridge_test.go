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

// sizedHandler is a gatedHandler whose records weigh what sizes says
// (RecordSizer), and which tracks the peak of the bytes running at once.
type sizedHandler struct {
	gatedHandler
	sizes            func(r *messages.Record) int64
	bytes, peakBytes atomic.Int64
}

func (h *sizedHandler) RecordBytes(r *messages.Record) int64 { return h.sizes(r) }

func (h *sizedHandler) Handle(ctx context.Context, r *messages.Record) error {
	n := h.sizes(r)
	raise(&h.peakBytes, h.bytes.Add(n))
	defer h.bytes.Add(-n)
	return h.gatedHandler.Handle(ctx, r)
}

// The bridge admits records while what they weigh fits Settings.InFlightBytes,
// across partitions, whatever the record limits allow; a record heavier than
// the whole budget runs alone, and everything finishes and is committed.
func TestBridgeBoundsInFlightBytes(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 16
	s.InFlightTotal = 32
	s.InFlightBytes = 1000
	h := &sizedHandler{gatedHandler: gatedHandler{release: make(chan struct{})}}
	h.sizes = func(r *messages.Record) int64 {
		if r.GetPartition() == 1 && r.GetOffset() == 5 {
			return 5000 // heavier than the whole budget
		}
		return 300
	}
	b := newTestBridge(t, s, h)
	marker := &recordingMarker{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess := &fakeSession{ctx: ctx, marker: marker}
	claims := []*fakeClaim{newFakeClaim(t, 0, 20), newFakeClaim(t, 1, 20)}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() {
			if err := b.ConsumeClaim(sess, c); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "3 records running", func() bool { return h.running.Load() == 3 })
	time.Sleep(50 * time.Millisecond) // every chance to overshoot
	if got := h.peak.Load(); got != 3 {
		t.Fatalf("peak in flight %d, want 3 (3 × 300 bytes fit 1000)", got)
	}
	close(h.release)
	waitFor(t, "every record finished", func() bool { return h.done.Load() == 40 })
	if got := h.peakBytes.Load(); got > 5000 {
		t.Fatalf("peak bytes running %d: the heavy record did not run alone", got)
	}
	if got := h.peakBytes.Load(); got > 1000 && got != 5000 {
		t.Fatalf("peak bytes running %d over the budget of 1000 beside the heavy record", got)
	}
	waitFor(t, "both partitions committed to the end", func() bool { return marker.get(0) == 20 && marker.get(1) == 20 })
	cancel()
	for _, c := range claims {
		c.close()
	}
	wg.Wait()
	if st := b.Credits(); st.Held != 0 || st.Bytes != 0 {
		t.Fatalf("credits or bytes held after every claim ended: %+v", st)
	}
}

var _ actors.RecordSizer = (*sizedHandler)(nil)
