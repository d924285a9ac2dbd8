package actors_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/actortest"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// capacityHandler is a downstream of k servers with service time l: calls
// past k queue (in no particular order), and the queueing is part of the
// call, as it is for a database pool or a VMaaS with a capacity.
type capacityHandler struct {
	l       time.Duration
	mu      sync.Mutex
	cond    *sync.Cond
	k       int
	serving int
	done    atomic.Int64
}

func newCapacityHandler(k int, l time.Duration) *capacityHandler {
	h := &capacityHandler{k: k, l: l}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *capacityHandler) setCapacity(k int) {
	h.mu.Lock()
	h.k = k
	h.cond.Broadcast()
	h.mu.Unlock()
}

func (h *capacityHandler) Handle(ctx context.Context, _ *messages.Record) error {
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer stop()
	h.mu.Lock()
	for h.serving >= h.k && ctx.Err() == nil {
		h.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		h.mu.Unlock()
		return err
	}
	h.serving++
	h.mu.Unlock()
	t := time.NewTimer(h.l)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	h.mu.Lock()
	h.serving--
	h.cond.Signal()
	h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	h.done.Add(1)
	return nil
}

// The adaptive limit follows the downstream's capacity through the real
// bridge, partition actors and concurrency actor: it falls from its
// initial 32 when the downstream serves 4 at a time, rises past it when the
// downstream serves 128, and the partition's bound S stays hard throughout.
func TestAdaptiveLimitFollowsTheDownstreamsCapacity(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 200
	s.InFlightTotal = 1024
	s.ConcurrencyFloor = 2
	h := newCapacityHandler(4, 5*time.Millisecond)
	b := newTestBridge(t, s, h)
	if c := b.Concurrency(); c.Mode != "adaptive" || c.Limit != limitInitial(s) {
		t.Fatalf("a new adaptive bridge: %+v, want adaptive at %d", c, limitInitial(s))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess := &fakeSession{ctx: ctx, marker: &recordingMarker{}}
	claim := newFakeClaim(t, 0, 200_000)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.ConsumeClaim(sess, claim); err != nil {
			t.Error(err)
		}
	})
	waitLonger(t, "the limit to fall to at most 4 × K=4", func() bool { return b.Concurrency().Limit <= 16 })
	low := b.Concurrency()
	if low.Baseline <= 0 || low.Windows == 0 {
		t.Fatalf("the limit fell without a baseline or a window: %+v", low)
	}
	h.setCapacity(128)
	waitLonger(t, "the limit to rise past 64 with K=128", func() bool { return b.Concurrency().Limit > 64 })
	if c := b.Credits(); c.Held > s.InFlightPerPartition {
		t.Fatalf("%d credits held by one partition, S = %d", c.Held, s.InFlightPerPartition)
	}
	claim.close()
	wg.Wait()
	checkCredits(t, b)
	if h.done.Load() == 0 {
		t.Fatal("no record was handled")
	}
}

func limitInitial(s actors.Settings) int { return min(s.InFlightTotal, 32) }

// waitLonger is waitFor with room for a controller's windows on a loaded
// machine under the race detector.
func waitLonger(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The partition actor sends the concurrency actor one HandlerSample per
// attempt that says something about congestion: a success (its handler
// time) or a failure at a dependency in outage (congested). A permanent
// failure and a skipped record send none.
func TestPartitionActorSamplesHandlerAttempts(t *testing.T) {
	system := newTestSystem(t)
	probe := actortest.NewProbe(t, system)
	var transientOnce atomic.Bool
	s := testSettings(ordering.Unordered)
	deps := actors.NewDependencies(s.BlameConfig())
	h := actors.HandlerFunc(func(_ context.Context, r *messages.Record) error {
		switch r.GetOffset() {
		case 0:
			time.Sleep(20 * time.Millisecond)
			return nil
		case 1:
			if transientOnce.CompareAndSwap(false, true) {
				deps.Probe("vmaas", time.Now(), false) // VMaaS is down for everyone
				return messages.FailedIn("vmaas", messages.Transient(errors.New("503")))
			}
			return nil
		case 2:
			return messages.Permanent(errors.New("malformed"))
		}
		return messages.Skip("filtered", "not ours")
	})
	pa := actors.NewPartitionActor(actors.PartitionConfig{
		Topic: "events", Partition: 0, Epoch: 1, Settings: s, Handler: h, Dependencies: deps,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Marker:      &recordingMarker{}, Samples: probe.PID(),
	})
	pid := system.Root.Spawn(pa.Props())
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	for o := int64(0); o < 4; o++ {
		system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Offset: o, Value: []byte("v")}})
	}
	var ok, congested int
	var slowest time.Duration
	for range 3 {
		m := actortest.ExpectMsg[*messages.HandlerSample](probe, 0)
		if m.GetCongested() {
			congested++
		} else {
			ok++
			slowest = max(slowest, m.GetHandlerTime().AsDuration())
		}
	}
	probe.ExpectNoMsg(200 * time.Millisecond)
	if ok != 2 || congested != 1 {
		t.Fatalf("samples: %d ok, %d congested; want 2 and 1", ok, congested)
	}
	if slowest < 20*time.Millisecond {
		t.Fatalf("the slowest success sampled %v, its handler took at least 20ms", slowest)
	}
}

// Fixed concurrency is today's pool: G credits, no concurrency actor.
func TestFixedConcurrencyHasNoController(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.Concurrency = actors.ConcurrencyFixed
	b := newTestBridge(t, s, actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }))
	if c := b.Concurrency(); c.Mode != "fixed" || c.Limit != s.InFlightTotal {
		t.Fatalf("fixed bridge: %+v, want fixed at G=%d", c, s.InFlightTotal)
	}
	if c := b.Credits(); c.Limit != s.InFlightTotal {
		t.Fatalf("fixed pool limit %d, want %d", c.Limit, s.InFlightTotal)
	}
}

// A record's failure at a dependency that serves is not a congestion
// sample; the same failure while the dependency is in outage (its health
// check fails) is. Counting a hanging host's timeouts shrank the limit until
// its calls were most of the dependency's.
func TestOwnFailuresAreNotCongestionSamples(t *testing.T) {
	for _, serving := range []bool{true, false} {
		system := newTestSystem(t)
		probe := actortest.NewProbe(t, system)
		deps := actors.NewDependencies(testSettings(ordering.Unordered).BlameConfig())
		var once atomic.Bool
		h := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
			// Just before the attempt fails, the dependency's check passes
			// (or fails).
			deps.Probe("vmaas", time.Now(), serving)
			deps.Observe(ctx, "vmaas", time.Millisecond, false)
			if once.CompareAndSwap(false, true) {
				return messages.FailedIn("vmaas", messages.Transient(errors.New("timed out")))
			}
			return nil
		})
		pa := actors.NewPartitionActor(actors.PartitionConfig{
			Topic: "events", Partition: 0, Epoch: 1, Settings: testSettings(ordering.Unordered), Handler: h, Dependencies: deps,
			DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
			Marker:      &recordingMarker{}, Samples: probe.PID(),
		})
		pid := system.Root.Spawn(pa.Props())
		system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Offset: 0, Value: []byte("v")}})
		congested := 0
		for {
			m := actortest.ExpectMsg[*messages.HandlerSample](probe, 0)
			if !m.GetCongested() {
				break // the retry that succeeded
			}
			congested++
		}
		if want := map[bool]int{true: 0, false: 1}[serving]; congested != want {
			t.Errorf("dependency serving others %v: %d congested samples, want %d", serving, congested, want)
		}
		_ = system.Root.StopFuture(pid).Wait()
	}
}
