package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// expectLetter waits for the next dead-letter write.
func expectLetter(t *testing.T, dlq *scriptedDeadLetters) *messages.DeadLetter {
	t.Helper()
	select {
	case l := <-dlq.seen:
		return l
	case <-time.After(3 * time.Second):
		t.Fatal("no dead-letter write within 3s")
		return nil
	}
}

// vmaasFails is a VMaaS failure of the record alone.
func vmaasFails() error {
	return messages.FailedIn("vmaas", messages.Transient(errors.New("vmaas: context deadline exceeded")))
}

// A record whose VMaaS call keeps failing while VMaaS serves the records
// after it is dead-lettered after MaxAttempts own failures, with its
// history (each failure judged own), and the partition commits past it.
func TestPartitionDeadLettersOwnTransientFailure(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq) // MaxAttempts 3
	f.admit(0, "hostage")
	next, attempts := f.failUntilDeadLettered(t, 0, 1, "vmaas", 3, vmaasFails, dlq.isWritten) // MaxAttempts 3
	l := expectLetter(t, dlq)
	if l.GetOwnFailures() != 3 || l.GetAttempts() != int32(attempts) || l.GetErrorClass() != messages.ErrorClass_ERROR_CLASS_TRANSIENT ||
		l.GetReason() != string(messages.ReasonTransient) {
		t.Fatalf("envelope: own %d, attempts %d (made %d), class %v, reason %q", l.GetOwnFailures(), l.GetAttempts(), attempts, l.GetErrorClass(), l.GetReason())
	}
	if len(l.GetHistory()) != attempts {
		t.Fatalf("history has %d entries, want %d", len(l.GetHistory()), attempts)
	}
	own := 0
	for i, h := range l.GetHistory() {
		if h.GetDependency() != "vmaas" || h.GetAttempt() != int32(i+1) || h.GetOwn() != (h.GetBlame() == messages.Blame_BLAME_OWN) {
			t.Fatalf("history[%d] = %v", i, h)
		}
		if h.GetOwn() {
			own++
		}
	}
	if own != 3 {
		t.Fatalf("history has %d failures judged own, want 3", own)
	}
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
	if s := f.stats.Snapshot(); s.DeadLettered != 1 || s.RetriedOwn != 3 || s.RetriedShared != 0 || s.Succeeded != next-1 ||
		s.DeadLetteredByReason[string(messages.ReasonTransient)] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// While the database is down for everyone (its health check fails),
// failures naming it do not count, however many: nothing is dead-lettered.
// Successes of another dependency (VMaaS) do not make database failures look
// like the record's own.
func TestPartitionSharedOutageDeadLettersNothing(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq) // MaxAttempts 3
	outage := func(ctx context.Context) error {
		f.deps.Probe(messages.DependencyDatabase, time.Now(), false)              // the health check fails too
		f.deps.Observe(ctx, messages.DependencyDatabase, time.Millisecond, false) // as the handler reports its calls
		return messages.FailedIn(messages.DependencyDatabase, messages.Transient(errors.New("connection refused")))
	}
	f.admit(0, "a")
	f.admit(1, "b")
	f.admit(2, "c") // needs no database: succeeds meanwhile
	const failures = 8
	seen := map[int64]int{}
	for seen[0] < failures || seen[1] < failures || seen[2] == 0 {
		c := expectCall(t, f.handler)
		seen[c.offset]++
		switch {
		case c.offset == 2:
			f.handler.answerCtx(2, func(ctx context.Context) error {
				f.deps.Observe(ctx, "vmaas", time.Millisecond, true)
				return nil
			})
		case seen[c.offset] <= failures:
			f.handler.answerCtx(c.offset, outage)
		}
	}
	for seen[0] <= failures || seen[1] <= failures { // the attempts after the outage
		seen[expectCall(t, f.handler).offset]++
	}
	f.handler.answer(1, ok)
	waitFor(t, "offset 1 to finish", func() bool { return f.handler.isFinished(1) })
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 3)
	select {
	case l := <-dlq.seen:
		t.Fatalf("dead-lettered offset %d during a shared outage", l.GetOriginalOffset())
	default:
	}
	if s := f.stats.Snapshot(); s.DeadLettered != 0 || s.RetriedShared != 2*failures || s.RetriedOwn != 0 {
		t.Fatalf("stats %+v; want %d shared retries and no dead letter", s, 2*failures)
	}
	// The listener's warning is fed every judged failure; the debug line
	// is sampled per record at attempts 1, 2, 4 and 8.
	got := f.deps.TakeFailures()
	want := actors.DependencyFailures{Dependency: messages.DependencyDatabase, Attempts: 2 * failures, Shared: 2 * failures,
		Records: []string{"events/3@0", "events/3@1"}, LastError: "connection refused"}
	if len(got) != 1 || got[0].Dependency != want.Dependency || got[0].Attempts != want.Attempts || got[0].Shared != want.Shared ||
		!slices.Equal(got[0].Records, want.Records) || !strings.Contains(got[0].LastError, want.LastError) {
		t.Fatalf("failures taken %+v; want one entry like %+v", got, want)
	}
	if again := f.deps.TakeFailures(); len(again) != 0 {
		t.Fatalf("second take %+v; want nothing new", again)
	}
	if n := f.logs.count("attempt failed; retrying"); n != 2*4 {
		t.Fatalf("%d per-attempt lines for %d failed attempts; want 8 (attempts 1, 2, 4, 8 of each record)", n, 2*failures)
	}
}

// A failure that names no dependency is judged by the handler's own
// outcomes: the record's own when other records are handled just after it.
func TestPartitionDeadLettersUnattributedFailureWhileOthersSucceed(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq)
	f.admit(0, "locked")
	next, _ := f.failUntilDeadLettered(t, 0, 1, "", 3, func() error { return errors.New("lock timeout") }, dlq.isWritten) // unclassified
	if l := expectLetter(t, dlq); l.GetOwnFailures() != 3 || l.GetError() != "lock timeout" || l.GetReason() != string(messages.ReasonUnknown) {
		t.Fatalf("envelope: own %d, error %q, reason %q", l.GetOwnFailures(), l.GetError(), l.GetReason())
	}
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
}

// The attempt timeout ends a handler that waits for ever on its context; the
// timed-out attempts count as the record's own while the records after
// them succeed, within the own-failure bound.
func TestPartitionAttemptTimeoutBoundsAHangingRecord(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	s := testSettings(ordering.ByKey)
	s.AttemptTimeout = 100 * time.Millisecond
	f := newPartitionFixture(t, s, dlq)
	f.admit(0, "hangs")
	start := time.Now()
	next := int64(1)
	for attempt := 1; attempt <= 3; attempt++ {
		expectCallOf(t, f.handler, 0) // never answered: it waits for its context
		f.waitFailed(t, 0, attempt)
		next = f.othersServed(t, next, 3, "")
	}
	l := expectLetter(t, dlq)
	if took := time.Since(start); took > s.OwnFailureBound()+time.Second {
		t.Fatalf("dead-lettered after %v; the bound is %v", took, s.OwnFailureBound())
	}
	if !strings.Contains(l.GetError(), "deadline exceeded") || l.GetOwnFailures() != 3 {
		t.Fatalf("envelope: error %q, own %d", l.GetError(), l.GetOwnFailures())
	}
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
}

// What the handler skips on purpose is finished and committed, counted by
// reason, and never dead-lettered.
func TestPartitionCommitsSkippedRecords(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq)
	f.admit(0, "a")
	f.admit(1, "b")
	expectCall(t, f.handler)
	expectCall(t, f.handler)
	f.handler.answer(1, ok)
	waitFor(t, "offset 1 to finish", func() bool { return f.handler.isFinished(1) })
	f.handler.answer(0, func() error { return messages.Skip(messages.Reason("reporter not allowed"), "reporter yupana") })
	f.marker.expectMark(t, 2)
	s := f.stats.Snapshot()
	if s.Skipped != 1 || s.SkippedByReason[string(messages.Reason("reporter not allowed"))] != 1 || s.Succeeded != 1 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v", s)
	}
	select {
	case l := <-dlq.seen:
		t.Fatalf("skipped record %d was dead-lettered", l.GetOriginalOffset())
	default:
	}
}

// A failure spent waiting for a connection every record shares
// (messages.Congested) is congestion, never the record's own, however well
// the database serves the records that got a connection.
func TestPartitionCongestionIsNeverOwn(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq) // MaxAttempts 3
	f.admit(0, "queued")
	next := int64(1)
	for attempt := 1; attempt <= 6; attempt++ {
		expectCallOf(t, f.handler, 0)
		f.handler.answer(0, func() error {
			return messages.FailedIn(messages.DependencyDatabase, messages.Transient(messages.Congested(fmt.Errorf("begin: %w", context.DeadlineExceeded))))
		})
		f.waitFailed(t, 0, attempt)
		next = f.othersServed(t, next, 3, messages.DependencyDatabase)
	}
	expectCallOf(t, f.handler, 0)
	f.handler.answer(0, ok)
	waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
	if s := f.stats.Snapshot(); s.DeadLettered != 0 || s.RetriedOwn != 0 || s.RetriedShared != 6 {
		t.Fatalf("stats %+v; want 6 shared retries and no dead letter", s)
	}
}
