package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// pinnedHandler holds offset 0 until release closes (or its context ends)
// and lets every other record through.
type pinnedHandler struct {
	release chan struct{}
	done    atomic.Int64
}

func (h *pinnedHandler) Handle(ctx context.Context, r *messages.Record) error {
	if r.GetOffset() == 0 {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.done.Add(1)
	return nil
}

// One pinned record stops admission span offsets after it: the partition is
// span-blocked, named with the record that holds it, and everything after
// is admitted once the record finishes.
func TestBridgeStopsAdmittingAtTheSpan(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 4
	s.SpanPerPartition = 8
	h := &pinnedHandler{release: make(chan struct{})}
	b := newTestBridge(t, s, h)
	marker := &recordingMarker{}
	sess := &fakeSession{ctx: context.Background(), marker: marker}
	claim := newFakeClaim(t, 0, 50)
	returned := make(chan error, 1)
	go func() { returned <- b.ConsumeClaim(sess, claim) }()

	// The bridge is span-blocked as soon as it holds offset 8; the
	// partition actor may still be admitting and finishing 1-7 then.
	waitFor(t, "the partition to be span-blocked with the span's records finished", func() bool {
		ps := b.Partitions()
		return len(ps) == 1 && !ps[0].SpanBlocked.IsZero() && ps[0].Admitted >= 7 && h.done.Load() >= 7
	})
	p := b.Partitions()[0]
	if p.PinnedOffset != 0 || p.Admitted != 7 || p.SpanLimit != 8 {
		t.Fatalf("span-blocked with pinned offset %d, admitted up to %d, span %d; want 0, 7, 8", p.PinnedOffset, p.Admitted, p.SpanLimit)
	}
	if got := h.done.Load(); got != 7 {
		t.Fatalf("%d records finished behind the pinned one, want the 7 the span holds", got)
	}
	if got := b.Stats().Snapshot().Admitted; got != 8 {
		t.Fatalf("admitted %d records, want 8 (offsets 0-7)", got)
	}
	close(h.release)
	waitFor(t, "all 50 records", func() bool { return h.done.Load() == 50 })
	if ps := b.Partitions(); !ps[0].SpanBlocked.IsZero() {
		t.Fatal("still span-blocked once the pinned record finished")
	}
	claim.close()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if got := marker.get(0); got != 50 {
		t.Fatalf("final mark %d, want 50", got)
	}
	checkCredits(t, b)
}

// A revoke that comes while the bridge waits for the watermark to move
// within the span ends the wait: the claim drains within the drain timeout,
// the pinned record is abandoned, nothing past it is marked.
func TestBridgeRevokeWhileSpanBlocked(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 2
	s.SpanPerPartition = 4
	s.DrainTimeout = 300 * time.Millisecond
	h := &pinnedHandler{release: make(chan struct{})}
	b := newTestBridge(t, s, h)
	marker := &recordingMarker{}
	sess := &fakeSession{ctx: context.Background(), marker: marker}
	claim := newFakeClaim(t, 0, 20)
	returned := make(chan struct{})
	go func() {
		_ = b.ConsumeClaim(sess, claim)
		close(returned)
	}()
	waitFor(t, "the partition to be span-blocked", func() bool {
		ps := b.Partitions()
		return len(ps) == 1 && !ps[0].SpanBlocked.IsZero()
	})
	start := time.Now()
	claim.close()
	select {
	case <-returned:
	case <-time.After(s.DrainTimeout + 3*time.Second):
		t.Fatal("ConsumeClaim did not return after the revoke")
	}
	if took := time.Since(start); took > s.DrainTimeout+time.Second {
		t.Fatalf("the revoke took %v to drain, drain timeout %v", took, s.DrainTimeout)
	}
	if got := marker.get(0); got > 0 {
		t.Fatalf("marked %d past the pinned offset 0", got)
	}
	if got := b.Stats().Snapshot(); got.Abandoned != 1 || got.Succeeded != 3 {
		t.Fatalf("stats %+v; want 3 succeeded behind the pinned record, which was abandoned", got)
	}
	checkCredits(t, b)
}

// The span's wait ends when the watermark comes close enough, and only
// then; lower watermarks are ignored.
func TestSpanWaitsForTheWatermark(t *testing.T) {
	sp := actors.NewSpan(10)
	sp.Advance(100)
	sp.Advance(50) // never backwards
	if got := sp.Watermark(); got != 100 {
		t.Fatalf("watermark %d after a lower Advance, want 100", got)
	}
	admitted := make(chan bool, 1)
	go func() { admitted <- actors.SpanWait(sp, context.Background(), 115, 112) }()
	sp.Advance(103) // 115 is still 10 or more past it
	select {
	case <-admitted:
		t.Fatal("offset 115 admitted with the watermark at 103 and a span of 10")
	case <-time.After(20 * time.Millisecond):
	}
	sp.Advance(106)
	select {
	case ok := <-admitted:
		if !ok {
			t.Fatal("wait gave up")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("offset 115 not admitted once the watermark reached 106")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { admitted <- actors.SpanWait(sp, ctx, 1000, 112) }()
	cancel()
	select {
	case ok := <-admitted:
		if ok {
			t.Fatal("wait admitted offset 1000 with the watermark at 106")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("wait did not end with its context")
	}
}

// newGapClaim returns a claim holding the given offsets, as a compacted
// topic or one with aborted transactions delivers them.
func newGapClaim(t *testing.T, offsets ...int64) *fakeClaim {
	c := &fakeClaim{msgs: make(chan *sarama.ConsumerMessage, len(offsets)), errs: make(chan *sarama.ConsumerError)}
	for _, o := range offsets {
		c.msgs <- &sarama.ConsumerMessage{Topic: "events", Offset: o, Key: []byte{byte(o)}}
	}
	t.Cleanup(c.close)
	return c
}

// A gap in the offsets wider than the span (a long aborted transaction,
// compaction) never stops the partition: once every admitted record is
// finished nothing pins it, and the next record is admitted however far it
// lies; also after a pinned record finishes.
func TestBridgeSpanCrossesGapsWiderThanItself(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []int64
		pinned  bool
	}{
		{"nothing in flight", []int64{0, 1, 100, 101, 5000}, false},
		{"after a pinned record", []int64{0, 1, 2, 3, 4, 100, 101}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSettings(ordering.Unordered)
			s.InFlightPerPartition = 4
			s.SpanPerPartition = 8
			h := &pinnedHandler{release: make(chan struct{})}
			if !tc.pinned {
				close(h.release)
			}
			b := newTestBridge(t, s, h)
			marker := &recordingMarker{}
			sess := &fakeSession{ctx: context.Background(), marker: marker}
			claim := newGapClaim(t, tc.offsets...)
			returned := make(chan error, 1)
			go func() { returned <- b.ConsumeClaim(sess, claim) }()
			if tc.pinned {
				waitFor(t, "the records behind the pinned one", func() bool { return h.done.Load() == 4 })
				close(h.release)
			}
			waitFor(t, "every record handled", func() bool { return h.done.Load() == int64(len(tc.offsets)) })
			claim.close()
			if err := <-returned; err != nil {
				t.Fatal(err)
			}
			if got, want := marker.get(0), tc.offsets[len(tc.offsets)-1]+1; got != want {
				t.Fatalf("final mark %d, want %d", got, want)
			}
			checkCredits(t, b)
		})
	}
}
