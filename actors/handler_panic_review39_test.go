package actors_test

// Review of 3c4ecda (issue 39): scratch tests that attack the handler-panic
// path (HandlerPanic, panicStack, HandleFailure).

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/actortest"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
	"google.golang.org/protobuf/types/known/durationpb"
)

// longestRecord is a slog handler that keeps the length of the longest
// record as text (message and attributes) and passes the record on.
type longestRecord struct {
	next slog.Handler
	mu   sync.Mutex
	max  int
	msg  string
}

func (l *longestRecord) Enabled(ctx context.Context, lv slog.Level) bool { return true }
func (l *longestRecord) Handle(ctx context.Context, r slog.Record) error {
	n := len(r.Message)
	r.Attrs(func(a slog.Attr) bool { n += len(a.Key) + len(a.Value.String()); return true })
	l.mu.Lock()
	if n > l.max {
		l.max, l.msg = n, r.Message
	}
	l.mu.Unlock()
	return l.next.Handle(ctx, r)
}
func (l *longestRecord) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *longestRecord) WithGroup(string) slog.Handler      { return l }

// reviewFixture is buildPartitionFixture with its logger wrapped.
func reviewFixture(t *testing.T, settings actors.Settings, dlq *scriptedDeadLetters, longest *longestRecord) *partitionFixture {
	t.Helper()
	h := newScriptedHandler()
	f := &partitionFixture{system: newTestSystem(t), stats: &actors.Stats{}, epoch: 7, deps: actors.NewDependencies(settings.BlameConfig()), logs: &logLines{},
		handler: h, dlq: dlq}
	longest.next = f.logs
	finished := func(o int64) bool { return h.isFinished(o) || dlq.isWritten(o) }
	f.marker = newCheckingMarker(t, finished, f.admittedOffsets)
	f.actor = actors.NewPartitionActor(actors.PartitionConfig{
		Topic: "events", Partition: 3, Epoch: f.epoch, Settings: settings,
		Handler: h, DeadLetters: dlq, Marker: f.marker, Stats: f.stats,
		Dependencies: f.deps, Logger: slog.New(longest), Release: func(n int, _ int64) { f.released.Add(int64(n)) },
	})
	f.pid = f.system.Root.Spawn(f.actor.Props())
	t.Cleanup(func() { _ = f.system.Root.StopFuture(f.pid).Wait() })
	return f
}

// A handler panicking with a large value (a request or record dumped into
// the panic, 64 KiB here): the commit says the panic's stack reaches the
// record's failure, its dead letter and the WARN line, bounded. The value
// comes first and is not bounded, so the failure text is cut (4 KiB) before
// the stack, and the WARN line carries the whole value.
func TestReview39LargePanicValueKeepsTheStackAndBoundsTheLog(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	longest := &longestRecord{}
	f := reviewFixture(t, testSettings(ordering.ByKey), dlq, longest)
	f.admit(0, "a")
	big := strings.Repeat("v", 64<<10)
	next, _ := f.failUntilDeadLettered(t, 0, 1, "", 3, func() error { panic(big) }, dlq.isWritten)
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
	l := expectLetter(t, dlq)
	if e := l.GetError(); !strings.Contains(e, "TestReview39LargePanicValueKeepsTheStackAndBoundsTheLog") {
		t.Errorf("the dead letter's error (%d bytes) lost the panic's stack; it ends %q", len(e), e[max(0, len(e)-120):])
	}
	longest.mu.Lock()
	defer longest.mu.Unlock()
	if bound := 8 << 10; longest.max > bound {
		t.Errorf("log record %q is %d bytes long (the panic value is %d), over %d", longest.msg, longest.max, len(big), bound)
	}
}

// With GODEBUG=panicnil=1 (what a main module on go < 1.21, or a
// //go:debug line, selects), panic(nil) makes recover() return nil: the
// deferred recover in evaluationActor.handle then swallows the panic, and
// handle returns err == nil. The record is reported handled (OUTCOME_OK)
// and committed though its handler never finished. Before 3c4ecda the
// record stayed in flight (protoactor's recover also saw nil), never
// committed.
func TestReview39NilPanicIsNotASuccess(t *testing.T) {
	t.Setenv("GODEBUG", "panicnil=1")
	f := newPartitionFixture(t, testSettings(ordering.ByKey), nil)
	f.admit(0, "a")
	expectCall(t, f.handler)
	f.handler.answer(0, func() error { panic(nil) })
	if c := expectCall(t, f.handler); c.offset != 0 || c.attempt != 2 {
		t.Fatalf("after panic(nil) got %+v, want a retry of offset 0", c)
	}
	if s := f.stats.Snapshot(); s.Succeeded != 0 || f.marker.committed() > 0 || s.Panics != 1 {
		t.Fatalf("a handler that panicked (with nil) counted as handled: succeeded %d, committed %d, panics %d",
			s.Succeeded, f.marker.committed(), s.Panics)
	}
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
}

// A handler that panics once its context is cancelled by a drain's
// deadline: the record is abandoned (not dead-lettered, not marked), the
// drain answers on time, and nothing stays in flight.
func TestReview39PanicAfterDrainCancelKeepsAccounting(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.ByKey), nil)
	probe := actortest.NewProbe(t, f.system)
	f.admit(0, "a")
	f.admit(1, "b")
	expectCall(t, f.handler)
	expectCall(t, f.handler)
	f.handler.answer(1, ok)
	f.handler.answerCtx(0, func(ctx context.Context) error { <-ctx.Done(); panic("after cancel") })
	timeout := 300 * time.Millisecond
	probe.Send(f.pid, &messages.Drain{Timeout: durationpb.New(timeout)})
	res := actortest.ExpectMsg[*messages.DrainResult](probe, 2*time.Second)
	if !res.GetTimedOut() || res.GetWatermark() != 0 || res.GetAbandoned() != 1 {
		t.Errorf("drain result %v; want timed out, watermark 0, 1 abandoned", res)
	}
	f.marker.expectNoMark(t, 100*time.Millisecond)
	if s := f.stats.Snapshot(); s.Abandoned != 1 || s.InFlight != 0 || s.DeadLettered != 0 || s.Panics != 1 {
		t.Errorf("stats %+v; want 1 abandoned, 0 in flight, none dead-lettered, 1 panic", s)
	}
	waitFor(t, "credits back", func() bool { return f.released.Load() == 2 })
}
