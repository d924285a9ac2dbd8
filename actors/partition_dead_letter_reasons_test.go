package actors_test

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A dead-lettered record's envelope says why in one value of a bounded set:
// a broken message's validation reason, however the handler wrapped its
// error, or else the class of the failure that decided; the stats count
// dead letters by that reason once their write is acknowledged, never the
// error's text.
func TestPartitionDeadLetterReasons(t *testing.T) {
	broken := func() error {
		return fmt.Errorf("decode event: %w", messages.Permanent(&messages.ValidationError{Reason: messages.Reason("missing host id"), Detail: "host.id is missing"}))
	}
	cases := []struct {
		name     string
		attempts int // 1: given up at its first failure; more: after its own failures
		fail     func() error
		want     messages.Reason
	}{
		{"broken message", 1, broken, messages.Reason("missing host id")},
		{"permanent, not broken", 1, func() error { return messages.Permanent(errors.New("host 42 not found in inventory")) }, messages.ReasonPermanent},
		{"own failures, unclassified", 3, func() error { return errors.New("nil map in handler") }, messages.ReasonUnknown},
		{"own failures, panics", 3, func() error { panic("index out of range") }, messages.ReasonPanic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The first write fails: counted only once acknowledged. Each
			// write waits for the gate, so the check between the two is not
			// a race with the retry.
			dlq := newScriptedDeadLetters(1, true)
			f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq) // MaxAttempts 3
			f.admit(0, "host")
			next, attempts := int64(1), 1
			if c.attempts == 1 {
				expectCallOf(t, f.handler, 0)
				f.handler.answer(0, c.fail)
			} else {
				// Its own: other records are handled just after each failure.
				next, attempts = f.failUntilDeadLettered(t, 0, 1, "", 3, c.fail, func(int64) bool { return len(dlq.seen) > 0 })
			}
			if l := expectLetter(t, dlq); l.GetReason() != string(c.want) {
				t.Fatalf("first write: envelope reason %q, want %q", l.GetReason(), c.want)
			}
			if s := f.stats.Snapshot(); s.DeadLettered != 0 || s.DeadLetteredByReason != nil {
				t.Fatalf("counted before the write was acknowledged: %+v", s)
			}
			dlq.gate <- struct{}{} // the first write goes on, and fails
			if l := expectLetter(t, dlq); l.GetReason() != string(c.want) || int(l.GetAttempts()) != attempts {
				t.Fatalf("envelope reason %q after %d attempts, want %q after %d", l.GetReason(), l.GetAttempts(), c.want, attempts)
			}
			if s := f.stats.Snapshot(); s.DeadLettered != 0 {
				t.Fatalf("counted after a failed write, before the second was acknowledged: %+v", s)
			}
			dlq.gate <- struct{}{} // the second succeeds
			waitFor(t, "everything committed", func() bool { return f.marker.committed() == next })
			s := f.stats.Snapshot()
			if want := map[string]int64{string(c.want): 1}; s.DeadLettered != 1 || !maps.Equal(s.DeadLetteredByReason, want) {
				t.Fatalf("dead-lettered %d by reason %v, want 1 by %v", s.DeadLettered, s.DeadLetteredByReason, want)
			}
		})
	}
}
