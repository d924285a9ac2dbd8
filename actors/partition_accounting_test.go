package actors

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// These tests reach inside the PartitionActor to break what production
// cannot break from outside (a child that panics outside any record's work,
// a ledger that refuses a finish) and check that its accounting stays right:
// the running count reaches zero so a drain ends early, keys are released in
// the gate, and each record's credit comes back exactly once.

// poke runs f on the actor's goroutine.
type poke func(a *PartitionActor)

// pokeable delegates to a PartitionActor and runs pokes.
type pokeable struct{ *PartitionActor }

func (p pokeable) Receive(c actor.Context) {
	if f, ok := c.Message().(poke); ok {
		f(p.PartitionActor)
		return
	}
	p.PartitionActor.Receive(c)
}

type accountingFixture struct {
	system   *actor.ActorSystem
	actor    *PartitionActor
	pid      *actor.PID
	released atomic.Int64
	handled  chan int64
	mu       sync.Mutex
	marks    []int64
}

func (f *accountingFixture) MarkOffset(_ string, _ int32, offset int64, _ string) {
	f.mu.Lock()
	f.marks = append(f.marks, offset)
	f.mu.Unlock()
}

func (f *accountingFixture) ResetOffset(string, int32, int64, string) {}

func (f *accountingFixture) lastMark() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.marks) == 0 {
		return -1
	}
	return f.marks[len(f.marks)-1]
}

func newAccountingFixture(t *testing.T, h Handler, dlq DeadLetterWriter) *accountingFixture {
	t.Helper()
	s := DefaultSettings()
	s.Ordering = ordering.ByKey
	s.BackoffMin, s.BackoffMax = time.Millisecond, 2*time.Millisecond
	s.MaxAttempts = 3
	f := &accountingFixture{system: NewActorSystem(slog.New(slog.DiscardHandler)), handled: make(chan int64, 64)}
	t.Cleanup(f.system.Shutdown)
	f.actor = NewPartitionActor(PartitionConfig{Topic: "events", Partition: 1, Epoch: 1, Settings: s, Handler: h, DeadLetters: dlq,
		Marker: f, Release: func(n int, _ int64) { f.released.Add(int64(n)) }})
	props := actor.PropsFromProducer(func() actor.Actor { return pokeable{f.actor} }, actor.WithDispatcher(f.actor.dispatcher),
		actor.WithSupervisor(f.actor))
	f.pid = f.system.Root.Spawn(props)
	t.Cleanup(func() { _ = f.system.Root.StopFuture(f.pid).Wait() })
	return f
}

func (f *accountingFixture) admit(offset int64, key string) {
	f.system.Root.Send(f.pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 1, Offset: offset, Key: []byte(key)}})
}

// drain drains with budget and returns the result and how long it took.
func (f *accountingFixture) drain(t *testing.T, budget time.Duration) (*messages.DrainResult, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := f.system.Root.RequestFuture(f.pid, &messages.Drain{Timeout: durationpb.New(budget)}, budget+2*time.Second).Result()
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	return res.(*messages.DrainResult), time.Since(start)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// panickingChild replaces the evaluation actor: it panics while starting,
// before any record's message reaches it.
type panickingChild struct{}

func (panickingChild) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		panic("child broke while starting")
	}
}

// A child that panics outside a record's attempt (here, while starting)
// still counts as the end of its work: the record is retried, the running
// count reaches zero, and a drain ends as soon as the work does instead of
// running to its deadline.
func TestPartitionChildPanicOutsideAttemptKeepsAccounting(t *testing.T) {
	var calls atomic.Int64
	h := HandlerFunc(func(context.Context, *messages.Record) error { calls.Add(1); return nil })
	f := newAccountingFixture(t, h, DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }))
	f.system.Root.Send(f.pid, poke(func(a *PartitionActor) {
		// the next child spawned breaks; the ones after it are the real thing
		good := a.childProps
		a.childProps = actor.PropsFromProducer(func() actor.Actor {
			a.childProps = good // Spawn runs the producer on this actor's goroutine
			return panickingChild{}
		}, actor.WithDispatcher(a.dispatcher), actor.WithMailbox(newChildMailbox))
	}))
	f.admit(0, "a")
	f.admit(1, "a")
	waitUntil(t, "both records handled", func() bool { return calls.Load() == 2 })
	waitUntil(t, "the watermark past both", func() bool { return f.lastMark() == 2 })
	res, took := f.drain(t, 5*time.Second)
	if took > time.Second || res.GetTimedOut() {
		t.Fatalf("drain took %v (timed out %v): the running count did not reach zero", took, res.GetTimedOut())
	}
	if got := f.released.Load(); got != 2 {
		t.Fatalf("credits given back %d, want 2", got)
	}
	if got := f.actor.stats.Snapshot().Panics; got != 1 {
		t.Fatalf("panics %d, want 1", got)
	}
}

// A finish the ledger refuses (its book and the actor's disagree: a bug)
// still gives back the record's credit once and releases its key, so the
// next record of the key runs and the drain ends early.
func TestPartitionRefusedFinishReleasesKeyAndCredit(t *testing.T) {
	var calls atomic.Int64
	proceed := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		calls.Add(1)
		if r.GetOffset() == 0 {
			<-proceed
		}
		return nil
	})
	f := newAccountingFixture(t, h, DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }))
	f.admit(0, "a")
	f.admit(1, "a") // held behind 0 by the gate
	waitUntil(t, "offset 0 running", func() bool { return calls.Load() == 1 })
	refused := make(chan error, 1)
	f.system.Root.Send(f.pid, poke(func(a *PartitionActor) {
		_, err := a.ledger.Finish(0) // the ledger now thinks 0 is done; the actor does not
		refused <- err
	}))
	if err := <-refused; err != nil {
		t.Fatal(err)
	}
	close(proceed)
	waitUntil(t, "offset 1 to run after 0", func() bool { return calls.Load() == 2 })
	res, took := f.drain(t, 5*time.Second)
	if took > time.Second || res.GetTimedOut() {
		t.Fatalf("drain took %v (timed out %v)", took, res.GetTimedOut())
	}
	if got := f.released.Load(); got != 2 {
		t.Fatalf("credits given back %d, want 2", got)
	}
	if got := f.actor.stats.refusedFinishes.Load(); got != 1 {
		t.Fatalf("refused finishes %d, want 1", got)
	}
}
