package actors

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// Found by review: a partition actor that stops with a handler running, a
// dependency shedding load for everyone, a record failing alone in a
// dependency nobody reports.
// A PartitionActor that fails (panics) while one of its children runs a
// handler must still stop: protoactor delivers Stopped only after
// every child has terminated, and the child's handler waits for the run
// context, which the actor cancels only in Stopped. Its credits stay held and
// Stopped() never closes (the bridge keeps feeding a dead actor) until the
// handler gives up on its own (AttemptTimeout; never when it is 0).
func TestPartitionActorFailureWithRunningHandlerStops(t *testing.T) {
	started := make(chan struct{}, 1)
	h := HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		started <- struct{}{}
		<-ctx.Done() // a handler that honours its context, as the Handler doc asks
		return ctx.Err()
	})
	s := DefaultSettings()
	s.Ordering = ordering.ByKey
	s.AttemptTimeout = 0
	system := NewActorSystem(slog.New(slog.DiscardHandler))
	t.Cleanup(system.Shutdown)
	var released atomic.Int64
	a := NewPartitionActor(PartitionConfig{Topic: "events", Partition: 1, Epoch: 1, Settings: s, Handler: h,
		DeadLetters: DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Marker:      markerFunc(func(int64) {}), Release: func(n int, _ int64) { released.Add(int64(n)) }})
	t.Cleanup(a.cancelRun) // let the handler go at the end, whatever happened
	// As Props(), plus pokes.
	props := actor.PropsFromProducer(func() actor.Actor { return pokeable{a} }, actor.WithDispatcher(a.dispatcher),
		actor.WithGuardian(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
	pid := system.Root.Spawn(props)
	system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 1, Offset: 0, Key: []byte("a")}})
	<-started
	system.Root.Send(pid, poke(func(*PartitionActor) { panic("partition actor bug") }))
	select {
	case <-a.Stopped():
	case <-time.After(3 * time.Second):
		t.Fatalf("the failed partition actor has not stopped after 3s (credits given back: %d of 1): its handler still waits for a cancel that only Stopped sends", released.Load())
	}
	if got := released.Load(); got != 1 {
		t.Fatalf("credits given back %d, want 1", got)
	}
}

// The same when the actor is stopped from
// outside (actorWorker.Drain stops it after an unanswered drain: "then it is
// stopped"): Stopped, and with it the cancel, waits for the children.
func TestPartitionStoppedActorWithRunningHandlerStops(t *testing.T) {
	var calls atomic.Int64
	started := make(chan struct{}, 100)
	h := HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		calls.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	s := DefaultSettings()
	s.BackoffMin, s.BackoffMax = time.Millisecond, 2*time.Millisecond
	system := NewActorSystem(slog.New(slog.DiscardHandler))
	t.Cleanup(system.Shutdown)
	a := NewPartitionActor(PartitionConfig{Topic: "events", Partition: 1, Epoch: 1, Settings: s, Handler: h,
		DeadLetters: DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Marker:      markerFunc(func(int64) {})})
	pid := system.Root.Spawn(a.Props())
	system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Offset: 0, Key: []byte("a")}})
	<-started
	system.Root.Stop(pid)
	select {
	case <-a.Stopped():
	case <-time.After(2 * time.Second):
		a.cancelRun()
		t.Fatalf("not stopped; handler calls %d", calls.Load())
	}
	t.Logf("handler calls %d", calls.Load())
}

// VMaaS shedding load (it "answers 503 under load", DESIGN §5) fails two
// calls in three for every record alike: a shared condition, no record's own
// fault. Though VMaaS serves some call during every attempt, most of its
// recent calls fail, so nothing may be dead-lettered.
func TestPartitionLoadSheddingDependencyDeadLettersNothing(t *testing.T) {
	s := DefaultSettings()
	s.Ordering = ordering.Unordered
	s.MaxAttempts = 3
	s.BackoffMin, s.BackoffMax = time.Millisecond, 5*time.Millisecond
	s.EvidenceWindow = 100 * time.Millisecond
	deps := NewDependencies(s.BlameConfig())
	var calls, dead atomic.Int64
	h := HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		time.Sleep(3 * time.Millisecond) // a call takes a little while
		if calls.Add(1)%3 != 0 {
			deps.Observe(ctx, "vmaas", 3*time.Millisecond, false) // as the VMaaS client reports each call
			return messages.FailedIn("vmaas", messages.Transient(errorString("503 Service Unavailable")))
		}
		deps.Observe(ctx, "vmaas", 3*time.Millisecond, true)
		return nil
	})
	system := NewActorSystem(slog.New(slog.DiscardHandler))
	t.Cleanup(system.Shutdown)
	stats := &Stats{}
	a := NewPartitionActor(PartitionConfig{Topic: "events", Partition: 1, Epoch: 1, Settings: s, Handler: h, Stats: stats, Dependencies: deps,
		DeadLetters: DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { dead.Add(1); return nil }),
		Marker:      markerFunc(func(int64) {})})
	pid := system.Root.Spawn(a.Props())
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	const n = 40
	for i := range n {
		system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 1, Offset: int64(i)}})
	}
	waitUntil(t, "every record finished", func() bool {
		return stats.Snapshot().Succeeded+stats.Snapshot().DeadLettered == n
	})
	if d := dead.Load(); d > 0 {
		t.Fatalf("%d of %d records dead-lettered while VMaaS failed two calls in three for everyone (own retries %d, shared %d)",
			d, n, stats.Snapshot().RetriedOwn, stats.Snapshot().RetriedShared)
	}
}

// A record whose failures are its own (every neighbour succeeds) must not be
// retried forever when its failure names a dependency nobody reports: it is
// then judged by the records of the process, which succeed.
func TestPartitionOwnFailureInUnreportedDependencyIsBounded(t *testing.T) {
	s := DefaultSettings()
	s.Ordering = ordering.ByKey
	s.MaxAttempts = 3
	s.BackoffMin, s.BackoffMax = time.Millisecond, 5*time.Millisecond
	s.EvidenceWindow = 100 * time.Millisecond
	deps := NewDependencies(s.BlameConfig())
	h := HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		if r.GetOffset() == 0 { // this host's profile fetch fails, for it alone
			return messages.FailedIn("inventory", messages.Transient(errorString("inventory: 503 for host h0")))
		}
		deps.Observe(ctx, messages.DependencyDatabase, time.Millisecond, true)
		deps.Observe(ctx, "vmaas", time.Millisecond, true)
		return nil
	})
	system := NewActorSystem(slog.New(slog.DiscardHandler))
	t.Cleanup(system.Shutdown)
	stats := &Stats{}
	a := NewPartitionActor(PartitionConfig{Topic: "events", Partition: 1, Epoch: 1, Settings: s, Handler: h, Stats: stats, Dependencies: deps,
		DeadLetters: DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Marker:      markerFunc(func(int64) {})})
	pid := system.Root.Spawn(a.Props())
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 1, Offset: 0, Key: []byte("h0")}})
	// neighbours keep succeeding the whole time
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 1, Offset: i, Key: []byte{byte(i)}}})
		}
	}()
	// The bound: three failures, each judged within its 100 ms window.
	deadline := time.Now().Add(s.OwnFailureBound() + 2*time.Second)
	for stats.Snapshot().DeadLettered == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("record 0 not dead-lettered within its bound of own failures (own %d, shared %d, held %d; %d neighbours succeeded meanwhile)",
				stats.Snapshot().RetriedOwn, stats.Snapshot().RetriedShared, stats.Snapshot().RetriedHeld, stats.Snapshot().Succeeded)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type markerFunc func(offset int64)

func (f markerFunc) MarkOffset(_ string, _ int32, offset int64, _ string) { f(offset) }
func (markerFunc) ResetOffset(string, int32, int64, string)               {}

type errorString string

func (e errorString) Error() string { return string(e) }
