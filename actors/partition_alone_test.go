package actors_test

import (
	"errors"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A record that fails while it is what stops every other call: partition
// ordering, its neighbour waiting behind it, nothing else in the process.
// No call to the dependency is served after its first failure, so the
// calls cannot tell its own trouble from an outage; the probe decides.

func vmaasHangs() error {
	return messages.FailedIn(messages.DependencyVMaaS, messages.Transient(errors.New("vmaas: context deadline exceeded")))
}

// With VMaaS's probe passing between its failures and no other record
// failing there, the record's failures are its own: dead-lettered after
// MaxAttempts, and the neighbour it held then runs and the partition
// commits past both.
func TestPartitionAloneWithAPassingProbeDeadLetters(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByPartition), dlq) // MaxAttempts 3
	f.deps.Observe(messages.DependencyVMaaS, true)                       // served once, before the record
	f.admit(0, "hostage")
	f.admit(1, "neighbour") // waits: partition order
	for attempt := 1; attempt <= 3; attempt++ {
		if c := expectCall(t, f.handler); c.offset != 0 || c.attempt != attempt {
			t.Fatalf("got %+v, want offset 0 attempt %d", c, attempt)
		}
		f.deps.Probe(messages.DependencyVMaaS, true) // after the previous failure
		f.handler.answer(0, vmaasHangs)
	}
	l := expectLetter(t, dlq)
	if l.GetOriginalOffset() != 0 || l.GetOwnFailures() != 3 {
		t.Fatalf("dead letter of offset %d with %d own failures, want offset 0 with 3", l.GetOriginalOffset(), l.GetOwnFailures())
	}
	f.marker.expectMark(t, 1)
	f.succeedServing(t, 1, messages.DependencyVMaaS)
	f.marker.expectMark(t, 2)
}

// The same record while VMaaS's probe fails too: an outage, however long.
// Nothing is dead-lettered; the record runs again once VMaaS is back.
func TestPartitionAloneWithAFailingProbeDeadLettersNothing(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByPartition), dlq)
	f.deps.Observe(messages.DependencyVMaaS, true)
	f.admit(0, "a")
	f.admit(1, "b")
	const failures = 8
	for attempt := 1; attempt <= failures; attempt++ {
		expectCall(t, f.handler)
		f.deps.Probe(messages.DependencyVMaaS, true)  // an earlier probe passed,
		f.deps.Probe(messages.DependencyVMaaS, false) // the latest failed
		f.handler.answer(0, vmaasHangs)
	}
	expectCall(t, f.handler)
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
	f.succeedServing(t, 1, "")
	f.marker.expectMark(t, 2)
	if dlq.isWritten(0) {
		t.Fatal("dead-lettered a record during an outage its probe saw")
	}
	if s := f.stats.Snapshot(); s.RetriedOwn != 0 || s.RetriedShared != failures {
		t.Fatalf("stats %+v, want %d shared retries and no own one", s, failures)
	}
}

// Without a probe of the dependency nothing tells the two apart: the
// record is retried as in an outage, never dead-lettered.
func TestPartitionAloneWithoutAProbeDeadLettersNothing(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByPartition), dlq)
	f.deps.Observe(messages.DependencyVMaaS, true)
	f.admit(0, "a")
	const failures = 6
	for range failures {
		expectCall(t, f.handler)
		f.handler.answer(0, vmaasHangs)
	}
	expectCall(t, f.handler)
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)
	if dlq.isWritten(0) {
		t.Fatal("dead-lettered with no evidence that the dependency serves anyone")
	}
}

// The probe passes but another record fails at the dependency too (a probe
// that misses what the calls hit, say): that is an outage shared by two,
// and neither failure counts.
func TestDependenciesAnotherRecordFailingMakesItShared(t *testing.T) {
	var d actors.Dependencies
	d.Observe(messages.DependencyVMaaS, true)
	since := time.Now()
	d.Probe(messages.DependencyVMaaS, true)
	if !actors.OwnFailureForTest(&d, messages.DependencyVMaaS, 0, since) {
		t.Fatal("alone with a passing probe: not own")
	}
	since = time.Now()
	d.Probe(messages.DependencyVMaaS, true)
	actors.OwnFailureForTest(&d, messages.DependencyVMaaS, 9, since.Add(-time.Hour)) // another record fails
	if actors.OwnFailureForTest(&d, messages.DependencyVMaaS, 0, since) {
		t.Fatal("own while another record failed at the dependency since")
	}
}
