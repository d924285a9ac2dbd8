package actors_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// fakeSession and fakeClaim stand in for sarama's, so the bridge can be
// tested without a broker.
type fakeSession struct {
	ctx    context.Context
	marker actors.OffsetMarker
}

func (s *fakeSession) Claims() map[string][]int32 { return nil }
func (s *fakeSession) MemberID() string           { return "member" }
func (s *fakeSession) GenerationID() int32        { return 1 }
func (s *fakeSession) MarkOffset(t string, p int32, o int64, m string) {
	s.marker.MarkOffset(t, p, o, m)
}
func (s *fakeSession) Commit()                                  {}
func (s *fakeSession) ResetOffset(string, int32, int64, string) {}
func (s *fakeSession) MarkMessage(m *sarama.ConsumerMessage, md string) {
	s.MarkOffset(m.Topic, m.Partition, m.Offset+1, md)
}
func (s *fakeSession) Context() context.Context { return s.ctx }

// fakeClaim closes like sarama's: Messages() and Errors() together, the
// records still buffered in Messages() readable after the close.
type fakeClaim struct {
	partition int32
	msgs      chan *sarama.ConsumerMessage
	errs      chan *sarama.ConsumerError
	closeOnce sync.Once
}

func (c *fakeClaim) Errors() <-chan *sarama.ConsumerError { return c.errs }

// close ends the claim as sarama does on a revoke.
func (c *fakeClaim) close() {
	c.closeOnce.Do(func() {
		close(c.msgs)
		close(c.errs)
	})
}

func (c *fakeClaim) Topic() string                            { return "events" }
func (c *fakeClaim) Partition() int32                         { return c.partition }
func (c *fakeClaim) InitialOffset() int64                     { return 0 }
func (c *fakeClaim) HighWaterMarkOffset() int64               { return 0 }
func (c *fakeClaim) Messages() <-chan *sarama.ConsumerMessage { return c.msgs }

// newFakeClaim returns a claim holding records 0..n-1, closed when the test ends.
func newFakeClaim(t *testing.T, partition int32, n int) *fakeClaim {
	c := &fakeClaim{partition: partition, msgs: make(chan *sarama.ConsumerMessage, n), errs: make(chan *sarama.ConsumerError)}
	for i := 0; i < n; i++ {
		c.msgs <- &sarama.ConsumerMessage{Topic: "events", Partition: partition, Offset: int64(i), Key: []byte{byte(i)}}
	}
	t.Cleanup(c.close)
	return c
}

// gatedHandler blocks every call until release closes (or, if it honours
// the context, until cancellation), and tracks the peak concurrency.
type gatedHandler struct {
	release     chan struct{}
	honourCtx   bool
	running     atomic.Int64
	peak        atomic.Int64
	perPart     sync.Map // partition -> *atomic.Int64 (running)
	peakPerPart sync.Map // partition -> *atomic.Int64 (peak)
	done        atomic.Int64
}

func counter(m *sync.Map, k int32) *atomic.Int64 {
	v, _ := m.LoadOrStore(k, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func (h *gatedHandler) Handle(ctx context.Context, r *messages.Record) error {
	raise(&h.peak, h.running.Add(1))
	raise(counter(&h.peakPerPart, r.GetPartition()), counter(&h.perPart, r.GetPartition()).Add(1))
	defer h.running.Add(-1)
	defer counter(&h.perPart, r.GetPartition()).Add(-1)
	if h.honourCtx {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		<-h.release
	}
	h.done.Add(1)
	return nil
}

type recordingMarker struct {
	ignoresMetadata
	mu   sync.Mutex
	last map[int32]int64
}

func (m *recordingMarker) MarkOffset(_ string, p int32, o int64, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[int32]int64{}
	}
	m.last[p] = o
}

func (m *recordingMarker) get(p int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.last[p]; ok {
		return v
	}
	return -1
}

func newTestBridge(t *testing.T, s actors.Settings, h actors.Handler) *actors.Bridge {
	t.Helper()
	system := newTestSystem(t)
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: system, Settings: s, Handler: h,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The bridge admits at most S records per partition and G per process.
func TestBridgeBoundsInFlight(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 4
	s.InFlightTotal = 6
	h := &gatedHandler{release: make(chan struct{})}
	b := newTestBridge(t, s, h)
	marker := &recordingMarker{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess := &fakeSession{ctx: ctx, marker: marker}

	claims := []*fakeClaim{newFakeClaim(t, 0, 50), newFakeClaim(t, 1, 50)}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() {
			if err := b.ConsumeClaim(sess, c); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "6 records running", func() bool { return h.running.Load() == 6 })
	// give the bridges every chance to overshoot
	time.Sleep(50 * time.Millisecond)
	if got := h.peak.Load(); got != 6 {
		t.Fatalf("peak in flight %d, want 6 (G)", got)
	}
	for p := int32(0); p < 2; p++ {
		if got := counter(&h.peakPerPart, p).Load(); got > 4 {
			t.Fatalf("partition %d peak in flight %d > S=4", p, got)
		}
	}
	if s := b.Stats().Snapshot(); s.InFlight > 6 || s.Admitted > 6 {
		t.Fatalf("admitted %d, in flight %d with G=6", s.Admitted, s.InFlight)
	}
	close(h.release)
	waitFor(t, "all 100 records", func() bool { return h.done.Load() == 100 })
	for _, c := range claims {
		c.close()
	}
	wg.Wait()
	for p := int32(0); p < 2; p++ {
		if got := marker.get(p); got != 50 {
			t.Fatalf("partition %d final mark %d, want 50", p, got)
		}
	}
	checkCredits(t, b)
}

// A bridge waiting for a credit returns when the session ends, within the
// drain timeout; the unfinished record is not marked.
func TestBridgeReturnsAtSessionEndWhileWaitingForCredit(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 1
	s.DrainTimeout = 300 * time.Millisecond
	h := &gatedHandler{release: make(chan struct{}), honourCtx: true}
	b := newTestBridge(t, s, h)
	marker := &recordingMarker{}
	ctx, cancel := context.WithCancel(context.Background())
	sess := &fakeSession{ctx: ctx, marker: marker}
	claim := newFakeClaim(t, 0, 3)

	returned := make(chan time.Duration, 1)
	go func() {
		_ = b.ConsumeClaim(sess, claim)
		returned <- 0
	}()
	waitFor(t, "the first record to run", func() bool { return h.running.Load() == 1 })
	start := time.Now()
	cancel()
	select {
	case <-returned:
	case <-time.After(s.DrainTimeout + 3*time.Second):
		t.Fatal("ConsumeClaim did not return after the session ended")
	}
	if took := time.Since(start); took > s.DrainTimeout+time.Second {
		t.Fatalf("ConsumeClaim took %v, drain timeout %v", took, s.DrainTimeout)
	}
	if got := marker.get(0); got > 0 {
		t.Fatalf("marked %d although offset 0 never finished", got)
	}
	if got := b.Stats().Snapshot(); got.Abandoned != 1 || got.InFlight != 0 {
		t.Fatalf("stats %+v; want 1 abandoned", got)
	}
	checkCredits(t, b)
}

// A revoked claim (Messages closed, session alive) drains, marks its final
// watermark and returns; a handler that ignores cancellation cannot hold it
// past the drain timeout.
func TestBridgeRevokedClaimDrainsWithinTimeout(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 8
	s.DrainTimeout = 200 * time.Millisecond
	stuck := make(chan struct{})
	defer close(stuck)
	var handled atomic.Int64
	h := actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		if r.GetOffset() == 2 {
			<-stuck // ignores ctx on purpose
		}
		handled.Add(1)
		return nil
	})
	b := newTestBridge(t, s, h)
	marker := &recordingMarker{}
	sess := &fakeSession{ctx: context.Background(), marker: marker}
	claim := newFakeClaim(t, 0, 5)
	returned := make(chan error, 1)
	go func() { returned <- b.ConsumeClaim(sess, claim) }()
	// Revoke only once the four records that can finish have: a claim
	// closed with records still buffered may end before admitting them.
	waitFor(t, "the four records that can finish", func() bool { return handled.Load() == 4 })
	start := time.Now()
	claim.close()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > s.DrainTimeout+time.Second {
		t.Fatalf("ConsumeClaim took %v with a %v drain timeout", took, s.DrainTimeout)
	}
	if got := marker.get(0); got != 2 {
		t.Fatalf("final mark %d, want 2 (offset 2 never finished)", got)
	}
	if handled.Load() != 4 {
		t.Fatalf("handled %d, want 4", handled.Load())
	}
	checkCredits(t, b)
}
