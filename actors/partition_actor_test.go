package actors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/actortest"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// Records finished out of order are marked only as the lowest unfinished one
// finishes; the checking marker fails the test on any mark past an
// unfinished offset.
func TestPartitionMarksOnlyInWatermarkOrder(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.Unordered), nil)
	offsets := []int64{10, 11, 13, 14, 17} // gaps: 12, 15 and 16 were compacted away
	for _, o := range offsets {
		f.admit(o, "")
	}
	for range offsets {
		expectCall(t, f.handler)
	}
	// finish everything but the first: the offset may not move, but the
	// commit metadata says what finished above it.
	for _, o := range []int64{17, 13, 14, 11} {
		f.handler.answer(o, ok)
	}
	f.marker.expectFinishedAbove(t, 11, 13, 14, 17)
	f.marker.expectNoMark(t, 100*time.Millisecond)
	f.handler.answer(10, ok)
	f.marker.expectMark(t, 18)
}

func TestPartitionMarksEachAdvance(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.Unordered), nil)
	for o := int64(0); o < 3; o++ {
		f.admit(o, "")
		expectCall(t, f.handler)
	}
	f.handler.answer(1, ok)
	f.marker.expectNoMark(t, 50*time.Millisecond)
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 2) // 0 and 1 done, 2 still running
	f.handler.answer(2, ok)
	f.marker.expectMark(t, 3)
}

// In key mode two records of one key never run at once, and they start in
// offset order; other keys are not held back.
func TestPartitionKeyOrder(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.ByKey), nil)
	keys := []string{"a", "b", "a", "c", "a", "b"}
	for i, k := range keys {
		f.admit(int64(i), k)
	}
	// a@0, b@1, c@3 start; a@2, a@4, b@5 wait.
	var started []int64
	for range 3 {
		started = append(started, expectCall(t, f.handler).offset)
	}
	slices.Sort(started)
	if !slices.Equal(started, []int64{0, 1, 3}) {
		t.Fatalf("started %v, want [0 1 3]", started)
	}
	select {
	case c := <-f.handler.calls:
		t.Fatalf("offset %d started while its key was busy", c.offset)
	case <-time.After(50 * time.Millisecond):
	}
	f.handler.answer(0, ok)
	if c := expectCall(t, f.handler); c.offset != 2 {
		t.Fatalf("after a@0, started %d, want a@2", c.offset)
	}
	f.handler.answer(2, ok)
	if c := expectCall(t, f.handler); c.offset != 4 {
		t.Fatalf("after a@2, started %d, want a@4", c.offset)
	}
	f.handler.answer(1, ok)
	if c := expectCall(t, f.handler); c.offset != 5 {
		t.Fatalf("after b@1, started %d, want b@5", c.offset)
	}
	for _, o := range []int64{3, 4, 5} {
		f.handler.answer(o, ok)
	}
	// marks arrive as the watermark moves; the last must be 6.
	deadline := time.After(3 * time.Second)
	for {
		select {
		case m := <-f.marker.marks:
			if m.offset == 6 {
				if o := f.handler.overlaps(); len(o) > 0 {
					t.Fatalf("records of one key overlapped: %v", o)
				}
				return
			}
		case <-deadline:
			t.Fatal("final mark 6 never came")
		}
	}
}

func TestPartitionModeRunsOneAtATime(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.ByPartition), nil)
	for o := int64(0); o < 3; o++ {
		f.admit(o, string(rune('a'+o)))
	}
	for want := int64(0); want < 3; want++ {
		if c := expectCall(t, f.handler); c.offset != want {
			t.Fatalf("started %d, want %d", c.offset, want)
		}
		select {
		case c := <-f.handler.calls:
			t.Fatalf("offset %d started while %d runs", c.offset, want)
		case <-time.After(30 * time.Millisecond):
		}
		f.handler.answer(want, ok)
		f.marker.expectMark(t, want+1)
	}
}

// A drain waits for running records until its deadline, then cancels them;
// the cancelled ones stay unmarked and the drain answers on time.
func TestPartitionDrainDeadlineLeavesCancelledUnmarked(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.ByKey), nil)
	probe := actortest.NewProbe(t, f.system)
	f.admit(0, "a")
	f.admit(1, "b")
	f.admit(2, "c")
	f.admit(3, "b") // held behind b@1: abandoned without starting
	for range 3 {
		expectCall(t, f.handler)
	}
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
	f.handler.answer(2, ok) // 2 finishes, 1 never does

	start := time.Now()
	timeout := 300 * time.Millisecond
	probe.Send(f.pid, &messages.Drain{Timeout: durationpb.New(timeout)})
	res := actortest.ExpectMsg[*messages.DrainResult](probe, 2*time.Second)
	took := time.Since(start)
	// Handlers are cancelled a tenth before the deadline, so that they can
	// return before the partition is handed over; the drain ends once they did.
	if took < timeout-timeout/10 || took > timeout+time.Second {
		t.Fatalf("drain took %v with a %v deadline", took, timeout)
	}
	if !res.GetTimedOut() || res.GetWatermark() != 1 || res.GetAbandoned() != 2 {
		t.Fatalf("drain result %v; want timed out, watermark 1, 2 abandoned", res)
	}
	if n := f.logs.warned("drain timed out"); n != 1 {
		t.Fatalf("%d warnings of the timed-out drain; want 1", n)
	}
	select {
	case o := <-f.handler.cancelled:
		if o != 1 {
			t.Fatalf("cancelled offset %d, want 1", o)
		}
	case <-time.After(time.Second):
		t.Fatal("the running handler was not cancelled at the deadline")
	}
	f.marker.expectNoMark(t, 100*time.Millisecond)
	select {
	case c := <-f.handler.calls:
		t.Fatalf("offset %d started after the drain", c.offset)
	default:
	}
	if s := f.stats.Snapshot(); s.Abandoned != 2 || s.InFlight != 0 {
		t.Fatalf("stats %+v; want 2 abandoned, 0 in flight", s)
	}
}

// A drain with nothing running completes at once and marks everything.
func TestPartitionDrainWaitsForRunningRecords(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.Unordered), nil)
	probe := actortest.NewProbe(t, f.system)
	f.admit(0, "")
	f.admit(1, "")
	expectCall(t, f.handler)
	expectCall(t, f.handler)
	probe.Send(f.pid, &messages.Drain{Timeout: durationpb.New(5 * time.Second)})
	probe.ExpectNoMsg(50 * time.Millisecond)
	f.handler.answer(1, ok)
	f.handler.answer(0, ok)
	res := actortest.ExpectMsg[*messages.DrainResult](probe, 2*time.Second)
	if res.GetTimedOut() || res.GetWatermark() != 2 || res.GetAbandoned() != 0 || res.GetFinished() != 2 {
		t.Fatalf("drain result %v; want watermark 2, 2 finished, none abandoned", res)
	}
	select {
	case <-f.actor.Stopped():
	case <-time.After(2 * time.Second):
		t.Fatal("partition actor did not stop after its drain")
	}
}

func TestPartitionRetriesTransientFailure(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.ByKey), nil)
	f.admit(0, "a")
	if c := expectCall(t, f.handler); c.attempt != 1 {
		t.Fatalf("attempt %d", c.attempt)
	}
	f.handler.answer(0, func() error { return messages.Transient(errors.New("vmaas 503")) })
	f.marker.expectNoMark(t, 30*time.Millisecond)
	if c := expectCall(t, f.handler); c.attempt != 2 {
		t.Fatalf("retry was attempt %d, want 2", c.attempt)
	}
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
	if s := f.stats.Snapshot(); s.Retried != 1 || s.Succeeded != 1 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A transient failure is retried past MaxAttempts: a record is never
// dead-lettered because a dependency was down.
func TestPartitionRetriesTransientFailuresWithoutLimit(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq) // MaxAttempts 3
	f.admit(0, "a")
	for attempt := 1; attempt <= 6; attempt++ {
		if c := expectCall(t, f.handler); c.attempt != attempt {
			t.Fatalf("attempt %d, want %d", c.attempt, attempt)
		}
		if attempt < 6 {
			f.handler.answer(0, func() error { return messages.Transient(errors.New("database restarting")) })
		}
	}
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
	if s := f.stats.Snapshot(); s.DeadLettered != 0 || s.Retried != 5 {
		t.Fatalf("stats %+v; want 5 retries and no dead letter", s)
	}
}

// A permanent failure is dead-lettered at once, and the record counts as
// finished only after the write is acknowledged.
func TestPartitionDeadLettersPermanentFailureBeforeFinishing(t *testing.T) {
	dlq := newScriptedDeadLetters(0, true)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq)
	f.admit(5, "host-1")
	expectCall(t, f.handler)
	f.handler.answer(5, func() error { return messages.Permanent(errors.New("missing org_id")) })
	var letter *messages.DeadLetter
	select {
	case letter = <-dlq.seen:
	case <-time.After(3 * time.Second):
		t.Fatal("no dead-letter write")
	}
	f.marker.expectNoMark(t, 100*time.Millisecond) // write not yet acknowledged
	close(dlq.gate)
	f.marker.expectMark(t, 6)
	if letter.GetOriginalOffset() != 5 || string(letter.GetKey()) != "host-1" || string(letter.GetValue()) != "value-5" ||
		letter.GetErrorClass() != messages.ErrorClass_ERROR_CLASS_PERMANENT || letter.GetAttempts() != 1 ||
		letter.GetError() != "missing org_id" || letter.GetConsumerGroup() != "test-group" || letter.GetOriginalPartition() != 3 {
		t.Fatalf("envelope %v", letter)
	}
	select {
	case c := <-f.handler.calls:
		t.Fatalf("a permanent failure was retried: %+v", c)
	default:
	}
}

// A dead-letter write that fails is retried; the record stays unfinished
// (and unmarked) until a write succeeds.
func TestPartitionRetriesFailingDeadLetterWrite(t *testing.T) {
	dlq := newScriptedDeadLetters(3, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq)
	f.admit(0, "a")
	// Its own failures run out (other records handled just after each):
	// then the DLQ.
	next, attempts := f.failUntilDeadLettered(t, 0, 1, "", 3, func() error { return errors.New("unclassified") },
		func(int64) bool { return len(dlq.seen) > 0 })
	for i := 0; i < 4; i++ { // three failed writes, then the one that succeeds
		select {
		case l := <-dlq.seen:
			if l.GetAttempts() != int32(attempts) || l.GetErrorClass() != messages.ErrorClass_ERROR_CLASS_UNKNOWN {
				t.Fatalf("envelope %v", l)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("dead-letter write %d never came", i+1)
		}
	}
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
	if s := f.stats.Snapshot(); s.DeadLettered != 1 || s.Succeeded != next-1 || s.Retried != int64(attempts) || s.RetriedOwn != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// A handler panic is supervised by the partition actor: the child is
// stopped, the attempt counts as failed and is retried; the system goes on.
func TestPartitionSurvivesHandlerPanic(t *testing.T) {
	f := newPartitionFixture(t, testSettings(ordering.ByKey), nil)
	f.admit(0, "a")
	expectCall(t, f.handler)
	f.handler.answer(0, func() error { panic("nil map in handler") })
	if c := expectCall(t, f.handler); c.offset != 0 || c.attempt != 2 {
		t.Fatalf("after the panic got %+v, want a retry of offset 0", c)
	}
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
	// the actor and the system still work
	f.admit(1, "a")
	expectCall(t, f.handler)
	f.handler.answer(1, ok)
	f.marker.expectMark(t, 2)
	if s := f.stats.Snapshot(); s.Panics != 1 || s.Succeeded != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// A handler that panics on every attempt, while it handles other records,
// ends in the dead-letter topic.
func TestPartitionDeadLettersRepeatedPanic(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq)
	f.admit(0, "a")
	next, attempts := f.failUntilDeadLettered(t, 0, 1, "", 3, func() error { panic("always") }, dlq.isWritten)
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
	l := expectLetter(t, dlq)
	if l.GetErrorClass() != messages.ErrorClass_ERROR_CLASS_PANIC || l.GetAttempts() != int32(attempts) || l.GetOwnFailures() != 3 {
		t.Fatalf("envelope %v", l)
	}
	// The envelope carries where the handler panicked, bounded, without
	// the recovery's own frames.
	e := l.GetError()
	if !strings.HasPrefix(e, "handler panicked: always\n") || !strings.Contains(e, "TestPartitionDeadLettersRepeatedPanic") ||
		strings.Contains(e, "runtime/debug.Stack") || len(e) > len("handler panicked: always\n")+actors.MaxPanicStackBytes {
		t.Fatalf("the dead letter's error does not show the panic's stack, bounded: %q", e)
	}
}

// The record holding the watermark is urgent in its handler's context, and
// the next one becomes urgent once the records before it finish, while it
// runs: the handler's shared resources serve it first.
func TestPartitionMarksTheOldestRecordUrgent(t *testing.T) {
	urgencies := make(chan struct {
		offset int64
		u      messages.Urgency
	}, 8)
	release := map[int64]chan struct{}{0: make(chan struct{}), 1: make(chan struct{}), 2: make(chan struct{})}
	var finished sync.Map
	h := actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		urgencies <- struct {
			offset int64
			u      messages.Urgency
		}{r.GetOffset(), messages.UrgencyOf(ctx)}
		<-release[r.GetOffset()]
		finished.Store(r.GetOffset(), true)
		return nil
	})
	dlq := newScriptedDeadLetters(0, false)
	f := buildPartitionFixture(t, testSettings(ordering.Unordered), h, func(o int64) bool { _, ok := finished.Load(o); return ok }, dlq, dlq.isWritten)
	for o := int64(0); o < 3; o++ {
		f.admit(o, "")
	}
	got := map[int64]messages.Urgency{}
	for range 3 {
		select {
		case c := <-urgencies:
			if c.u == nil {
				t.Fatalf("offset %d ran without an urgency in its context", c.offset)
			}
			got[c.offset] = c.u
		case <-time.After(3 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	if !got[0].Urgent() || got[1].Urgent() || got[2].Urgent() {
		t.Fatalf("urgent: 0 %v, 1 %v, 2 %v; want only the oldest, 0", got[0].Urgent(), got[1].Urgent(), got[2].Urgent())
	}
	close(release[2]) // finishing out of order changes nothing
	waitFor(t, "offset 2 to finish", func() bool { return f.stats.Snapshot().Succeeded == 1 })
	if !got[0].Urgent() || got[1].Urgent() {
		t.Fatal("urgency moved when a record after the oldest finished")
	}
	close(release[0])
	waitFor(t, "offset 1, running, to become urgent", func() bool { return got[1].Urgent() })
	if got[0].Urgent() {
		t.Fatal("the finished record is still urgent")
	}
	close(release[1])
}
