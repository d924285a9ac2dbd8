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

// panickySizer is a handler whose RecordBytes panics on one record (a
// hostile record its sizing does not expect), and which handles every record.
type panickySizer struct{ handled atomic.Int64 }

func (h *panickySizer) RecordBytes(r *messages.Record) int64 {
	if r.GetOffset() == 3 {
		var headers []*messages.Header
		return int64(len(headers[0].GetValue())) // index out of range
	}
	return 100
}

func (h *panickySizer) Handle(context.Context, *messages.Record) error {
	h.handled.Add(1)
	return nil
}

// RecordBytes is the handler's code, run on the bridge's goroutine (sarama's
// ConsumeClaim), where nothing supervises it: a panic there ends the
// process, which a handler's panic never may (invariant 6).
func TestByteBudgetSurvivesAPanickingSizer(t *testing.T) {
	s := testSettings(ordering.ByKey)
	s.InFlightBytes = 1000
	h := &panickySizer{}
	b := newTestBridge(t, s, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := &recordingMarker{}
	claim := newFakeClaim(t, 0, 10)
	panicked := make(chan any, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() { panicked <- recover() }()
		_ = b.ConsumeClaim(&fakeSession{ctx: ctx, marker: marker}, claim)
	})
	deadline := time.After(5 * time.Second)
	for marker.get(0) != 10 {
		select {
		case p := <-panicked:
			if p != nil {
				t.Fatalf("ConsumeClaim panicked (in production: the process ends): %v", p)
			}
		case <-deadline:
			t.Fatalf("committed %d of 10", marker.get(0))
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	claim.close()
	wg.Wait()
	if p := <-panicked; p != nil {
		t.Fatalf("ConsumeClaim panicked: %v", p)
	}
	if st := b.Credits(); st.Held != 0 || st.Bytes != 0 {
		t.Fatalf("credits or bytes held after the claim ended: %+v", st)
	}
}

var _ actors.RecordSizer = (*panickySizer)(nil)
