package actors_test

import (
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"

	"github.com/patchflow/patchflow/actors"
)

// admitUnreadable hands the actor an offset no fetch can read, as the
// bridge does, and records it as admitted for the checking marker.
func (f *partitionFixture) admitUnreadable(offset int64, limit int) {
	f.mu.Lock()
	f.admitted = append(f.admitted, offset)
	f.mu.Unlock()
	actors.AdmitUnreadable(f.system.Root, f.pid, offset, limit)
}

// An offset no fetch can read is dead-lettered at once, by offset (no key,
// no value, the reason and the limit said), and is finished like a record:
// the committed offset stays below it until its envelope is acknowledged
// (the checking marker fails any mark past an unfinished offset). It is no
// record's turn: with one record of the partition at a time, the next
// record runs while its envelope is written, and the partition's order
// holds (no two records at once) after it finished.
func TestUnreadableOffsetIsDeadLetteredAndFinishedLikeARecord(t *testing.T) {
	dlq := newScriptedDeadLetters(0, true)
	f := newPartitionFixture(t, testSettings(ordering.ByPartition), dlq)
	f.admit(0, "a")
	expectCallOf(t, f.handler, 0)
	f.admitUnreadable(1, 4096)
	f.admit(2, "b")
	f.admit(3, "b")
	var letter *messages.DeadLetter
	select {
	case letter = <-dlq.seen:
	case <-time.After(3 * time.Second):
		t.Fatal("no dead-letter write of the unreadable offset within 3s")
	}
	if letter.GetOriginalOffset() != 1 || letter.GetReason() != string(messages.ReasonUnreadableBatch) || letter.GetKey() != nil ||
		letter.GetValue() != nil || !strings.Contains(letter.GetError(), "4096") {
		t.Fatalf("envelope: offset %d, reason %q, key %q, %d bytes of value, error %q; want offset 1, %q, no key or value, the limit named",
			letter.GetOriginalOffset(), letter.GetReason(), letter.GetKey(), len(letter.GetValue()), letter.GetError(), messages.ReasonUnreadableBatch)
	}
	f.handler.answer(0, ok)
	f.marker.expectMark(t, 1)     // not past the unreadable offset: its envelope is not acknowledged
	expectCallOf(t, f.handler, 2) // the unreadable offset holds no record back
	close(dlq.gate)               // acknowledged: finished
	f.marker.expectMark(t, 2)
	if n := f.stats.Snapshot().DeadLetteredByReason[string(messages.ReasonUnreadableBatch)]; n != 1 {
		t.Fatalf("%d dead letters counted for %q, want 1", n, messages.ReasonUnreadableBatch)
	}
	select { // finishing it must not let the record after 2 start beside it
	case c := <-f.handler.calls:
		t.Fatalf("record %d started while record 2 ran, once the unreadable offset finished", c.offset)
	case <-time.After(200 * time.Millisecond):
	}
	f.handler.answer(2, ok)
	expectCallOf(t, f.handler, 3)
	f.handler.answer(3, ok)
	waitFor(t, "the mark past every offset", func() bool { return f.marker.committed() == 4 })
	if o := f.handler.overlaps(); len(o) > 0 {
		t.Fatalf("records of the partition ran at once: %v", o)
	}
}
