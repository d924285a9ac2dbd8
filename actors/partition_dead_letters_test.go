package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/actortest"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// brokenDeadLetters fails every write while failing is set, like a
// dead-letter topic that does not exist; it counts the writes.
type brokenDeadLetters struct {
	failing atomic.Bool
	writes  atomic.Int64
	written atomic.Int64
}

func (d *brokenDeadLetters) Write(ctx context.Context, _ *messages.DeadLetter) error {
	d.writes.Add(1)
	if d.failing.Load() {
		return errors.New("dead-letter topic events.dlq does not exist: create it")
	}
	d.written.Add(1)
	return nil
}

// A dead-letter write that cannot succeed keeps the record unfinished, shows
// the partition blocked with the reason, logs the trouble once rather than
// per retry, and logs "record dead-lettered" only once a write is
// acknowledged; when the cause is fixed the record finishes.
func TestPartitionDeadLetterWriteThatCannotSucceed(t *testing.T) {
	broken := &brokenDeadLetters{}
	broken.failing.Store(true)
	pf := newPartitionFixtureWith(t, testSettings(ordering.ByKey), broken)
	pf.admit(0, "a")
	pf.admit(1, "b")
	expectCall(t, pf.handler)
	expectCall(t, pf.handler)
	pf.handler.answer(1, ok)
	pf.handler.answer(0, func() error { return messages.Permanent(errors.New("missing org_id")) })

	waitFor(t, "20 failed writes", func() bool { return broken.writes.Load() >= 20 })
	st := pf.actor.State()
	if st.DeadLetterBlocked == nil || st.DeadLetterBlocked.Offset != 0 || st.DeadLetterBlocked.Writes < 3 ||
		!strings.Contains(st.DeadLetterBlocked.Error, "does not exist: create it") {
		t.Fatalf("partition state %+v; want blocked by offset 0 with the reason", st.DeadLetterBlocked)
	}
	pf.marker.expectNoMark(t, 20*time.Millisecond)
	if n := pf.logs.count("dead-letter write failed; the record stays unfinished and the write is retried until it succeeds"); n != 1 {
		t.Fatalf("logged the failing write %d times in %d writes; want once (rate-limited)", n, broken.writes.Load())
	}
	if n := pf.logs.count("record dead-lettered"); n != 0 {
		t.Fatalf("logged %q before any write was acknowledged", "record dead-lettered")
	}
	if s := pf.stats.Snapshot(); s.DeadLetterWriteFailures < 20 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v", s)
	}

	broken.failing.Store(false)
	pf.marker.expectMark(t, 2)
	if st := pf.actor.State(); st.DeadLetterBlocked != nil {
		t.Fatalf("still blocked after the write succeeded: %+v", st.DeadLetterBlocked)
	}
	if n := pf.logs.count("record dead-lettered"); n != 1 {
		t.Fatalf("logged %q %d times, want once", "record dead-lettered", n)
	}
}

// newPartitionFixtureWith is newPartitionFixture with any dead-letter
// writer; the checking marker counts a record finished once the writer was
// called for it successfully or the handler succeeded.
func newPartitionFixtureWith(t *testing.T, s actors.Settings, dlq actors.DeadLetterWriter) *partitionFixture {
	t.Helper()
	acked := &ackedDeadLetters{inner: dlq}
	return newPartitionFixtureFull(t, s, acked, acked.isAcked)
}

// A drain is never held by a dead-letter write that does not return: the
// write's context is cancelled at the drain's cancel point, the record is
// abandoned (not marked), and the drain answers by its deadline.
func TestPartitionDrainNotHeldByDeadLetterWrite(t *testing.T) {
	blocking := actors.DeadLetterFunc(func(ctx context.Context, _ *messages.DeadLetter) error {
		<-ctx.Done()
		return ctx.Err()
	})
	f := newPartitionFixtureWith(t, testSettings(ordering.ByKey), blocking)
	probe := actortest.NewProbe(t, f.system)
	f.admit(0, "a")
	f.admit(1, "b")
	expectCall(t, f.handler)
	expectCall(t, f.handler)
	f.handler.answer(0, func() error { return messages.Permanent(errors.New("invalid")) })
	f.handler.answer(1, ok)
	waitFor(t, "offset 1 to finish", func() bool { return f.handler.isFinished(1) })

	timeout := 300 * time.Millisecond
	start := time.Now()
	probe.Send(f.pid, &messages.Drain{Timeout: durationpb.New(timeout)})
	res := actortest.ExpectMsg[*messages.DrainResult](probe, 2*time.Second)
	if took := time.Since(start); took > timeout+200*time.Millisecond {
		t.Fatalf("drain took %v with a %v budget", took, timeout)
	}
	if res.GetWatermark() != 0 || res.GetAbandoned() != 1 {
		t.Fatalf("drain result %v; want watermark 0 (offset 0 unfinished) and 1 abandoned", res)
	}
	if got := f.marker.committed(); got != 0 {
		t.Fatalf("committed %d at the drain, want 0", got)
	}
	f.marker.expectNoMark(t, 50*time.Millisecond)
	if got := f.released.Load(); got != 2 {
		t.Fatalf("credits given back %d, want 2 (one per record, once)", got)
	}
}

// A completion that arrives after the drain answered is never marked: the
// actor has stopped; the next owner redelivers the record.
func TestPartitionCompletionAfterDrainIsNotMarked(t *testing.T) {
	release := make(chan struct{})
	h := actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		<-release // ignores its context on purpose
		return nil
	})
	f := newPartitionFixtureHandler(t, testSettings(ordering.Unordered), h)
	probe := actortest.NewProbe(t, f.system)
	f.admit(0, "")
	waitFor(t, "offset 0 to be in flight", func() bool { return f.actor.State().InFlight == 1 })
	probe.Send(f.pid, &messages.Drain{Timeout: durationpb.New(100 * time.Millisecond)})
	res := actortest.ExpectMsg[*messages.DrainResult](probe, 2*time.Second)
	if !res.GetTimedOut() || res.GetAbandoned() != 1 {
		t.Fatalf("drain result %v", res)
	}
	if got := f.marker.committed(); got != 0 { // the drain's final mark: offset 0 is next
		t.Fatalf("committed %d at the drain, want 0", got)
	}
	close(release) // the handler now succeeds, after the drain
	select {
	case <-f.actor.Stopped():
	case <-time.After(2 * time.Second):
		t.Fatal("partition actor did not stop")
	}
	f.marker.expectNoMark(t, 100*time.Millisecond)
	if got := f.released.Load(); got != 1 {
		t.Fatalf("credits given back %d, want exactly 1", got)
	}
}
