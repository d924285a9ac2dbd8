package actors_test

// Regressions of the adaptive in-flight limit's
// wiring (samples, credits, the concurrency actor's lifetime).

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/actortest"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// poolWaitHandler models the database layer (persistence.poolWait): a
// record waiting for a connection of a pool that is never free returns
// messages.Congested(ctx.Err()) when its context ends.
type poolWaitHandler struct{ waiting atomic.Int64 }

func (h *poolWaitHandler) Handle(ctx context.Context, _ *messages.Record) error {
	h.waiting.Add(1)
	<-ctx.Done()
	return messages.Congested(ctx.Err())
}

// A drain that cancels records waiting for a shared resource (a rebalance,
// a shutdown) is a cancellation, not congestion: pipeline.proto says
// cancellations are not sent to the concurrency actor. The partition actor
// once sent one congested HandlerSample per cancelled record: it tested
// RecordFailed.congested, which the evaluation actor leaves set when it
// turns the class into CANCELLED.
func TestDrainCancellationIsNotACongestionSample(t *testing.T) {
	system := newTestSystem(t)
	probe := actortest.NewProbe(t, system)
	h := &poolWaitHandler{}
	s := testSettings(ordering.Unordered)
	pa := actors.NewPartitionActor(actors.PartitionConfig{
		Topic: "events", Partition: 0, Epoch: 1, Settings: s, Handler: h,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Marker:      &recordingMarker{}, Samples: probe.PID(),
	})
	pid := system.Root.Spawn(pa.Props())
	const n = 8
	for o := int64(0); o < n; o++ {
		system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Offset: o, Value: []byte("v")}})
	}
	waitFor(t, "every record waiting for a connection", func() bool { return h.waiting.Load() == n })
	res, err := system.Root.RequestFuture(pid, &messages.Drain{Timeout: durationpb.New(200 * time.Millisecond)}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(*messages.DrainResult); r.GetAbandoned() != n {
		t.Fatalf("drain result %+v, want %d abandoned", r, n)
	}
	<-pa.Stopped()
	congested := 0
	for {
		env, ok := probe.Next(300 * time.Millisecond)
		if !ok {
			break
		}
		if m, ok := env.Message.(*messages.HandlerSample); ok && m.GetCongested() {
			congested++
		}
	}
	if congested > 0 {
		t.Fatalf("the drain's cancellation of %d records waiting for a connection sent %d congested samples; want none", n, congested)
	}
}

// The same through the real bridge and concurrency actor: a revoke of a
// claim whose records wait for the shared pool, then a new claim that runs
// fine at the baseline. The rebalance alone should not cut the limit.
func TestRebalanceDoesNotCutTheLimit(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 64
	s.DrainTimeout = 200 * time.Millisecond
	var phase atomic.Int64 // 0: records wait for the pool until cancelled; 1: records take 2ms
	var waiting atomic.Int64
	h := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		if phase.Load() == 0 {
			waiting.Add(1)
			<-ctx.Done()
			return messages.Congested(ctx.Err())
		}
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	b := newTestBridge(t, s, h)
	before := b.Concurrency()
	sess := &fakeSession{ctx: context.Background(), marker: &recordingMarker{}}
	first := newFakeClaim(t, 0, 100)
	var wg sync.WaitGroup
	wg.Go(func() { _ = b.ConsumeClaim(sess, first) })
	waitFor(t, "the first claim's records waiting for the pool", func() bool { return waiting.Load() == int64(before.Limit) })
	first.close()
	wg.Wait()
	checkCredits(t, b)
	phase.Store(1)
	second := newFakeClaim(t, 1, 100_000)
	wg.Go(func() { _ = b.ConsumeClaim(sess, second) })
	waitLonger(t, "the first window after the rebalance", func() bool { return b.Concurrency().Windows > before.Windows })
	after := b.Concurrency()
	second.close()
	wg.Wait()
	checkCredits(t, b)
	if after.Limit < before.Limit {
		t.Fatalf("a rebalance cut the adaptive limit %d -> %d (window 1: %+v)", before.Limit, after.Limit, after)
	}
}

// Bridge.Close twice, as a deferred Close after an explicit one would.
func TestBridgeCloseTwice(t *testing.T) {
	s := testSettings(ordering.Unordered)
	b := newTestBridge(t, s, actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }))
	b.Close()
	start := time.Now()
	b.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a second Close took %v", d)
	}
}

// Bridge.Close after the actor system has shut down.
func TestBridgeCloseAfterShutdown(t *testing.T) {
	system := actors.NewActorSystem(discardLogger())
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: system, Settings: testSettings(ordering.Unordered),
		Handler:     actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	system.Shutdown()
	start := time.Now()
	b.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close after the system's shutdown took %v", d)
	}
}

// A revoke while the bridge waits for an adaptive process credit (not a
// partition credit): the wait ends at once, the claim drains within the
// drain timeout, and every credit comes back; the other claim, which held
// the only credit, then runs to its end.
func TestRevokeWhileWaitingForAnAdaptiveCredit(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightTotal = 1 // floor = ceiling = 1
	s.DrainTimeout = 300 * time.Millisecond
	h := &gatedHandler{release: make(chan struct{})}
	b := newTestBridge(t, s, h)
	if c := b.Concurrency(); c.Limit != 1 {
		t.Fatalf("limit %d, want 1", c.Limit)
	}
	sess := &fakeSession{ctx: context.Background(), marker: &recordingMarker{}}
	holder := newFakeClaim(t, 0, 5)
	var wg sync.WaitGroup
	wg.Go(func() { _ = b.ConsumeClaim(sess, holder) })
	waitFor(t, "the holder's record running", func() bool { return h.running.Load() == 1 })
	starved := newFakeClaim(t, 1, 5)
	returned := make(chan time.Duration, 1)
	go func() {
		_ = b.ConsumeClaim(sess, starved)
		returned <- 0
	}()
	waitFor(t, "the second claim waiting for a process credit", func() bool {
		for _, p := range b.Partitions() {
			if p.Partition == 1 && !p.WaitingForCredit.IsZero() {
				return true
			}
		}
		return false
	})
	start := time.Now()
	starved.close()
	select {
	case <-returned:
	case <-time.After(s.DrainTimeout + 3*time.Second):
		t.Fatal("the revoked claim did not return")
	}
	if d := time.Since(start); d > s.DrainTimeout+time.Second {
		t.Fatalf("revoked claim returned after %v", d)
	}
	if c := b.Credits(); c.Held != 1 || c.HeldByClaims != 1 {
		t.Fatalf("after the revoke: %+v, want the holder's one credit", c)
	}
	close(h.release)
	waitFor(t, "the holder's records", func() bool { return h.done.Load() == 5 })
	holder.close()
	wg.Wait()
	checkCredits(t, b)
}
