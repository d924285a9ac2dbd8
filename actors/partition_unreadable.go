package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/messages"
)

// unreadableAdmitted hands the partition actor an offset no fetch can read
// (its batch decompresses past limit bytes), from the bridge, which holds
// one credit for it as for a record.
type unreadableAdmitted struct {
	offset int64
	limit  int
}

// admitUnreadable admits m's offset like a record (the ledger, the credits,
// the drain) and dead-letters it at once, by offset: its envelope has no
// key and no value, only where it lies and why. It never runs the handler
// and takes no place in the ordering gate (it has no key; it is no
// record's turn). It finishes, like any record, once the envelope is
// acknowledged; a failing write holds it as it holds any record.
func (a *PartitionActor) admitUnreadable(c actor.Context, m *unreadableAdmitted) {
	if a.isDraining() || a.stopping {
		a.cfg.Release(1, 0) // not admitted: the next claim meets the offset again (it holds no bytes)
		return
	}
	rec := &messages.Record{Topic: a.cfg.Topic, Partition: a.cfg.Partition, Offset: m.offset}
	if err := a.ledger.Admit(m.offset); err != nil {
		a.logger.Warn("unreadable offset dropped", "offset", m.offset, "error", err)
		a.cfg.Release(1, 0)
		return
	}
	a.stats.admitted.Add(1)
	if a.ledger.Restored(m.offset) {
		a.resumed(c, rec, 0) // the earlier owner dead-lettered it
		return
	}
	a.stats.inFlight.Add(1)
	now := time.Now()
	st := &recordState{record: rec, admitted: now, unreadable: true}
	a.records[m.offset] = st
	a.gauges.admitted.Store(m.offset)
	a.gauges.inFlight.Store(int64(a.ledger.InFlight()))
	if a.ledger.InFlight() == 1 {
		a.publishPin()
	}
	letter := newUnreadableDeadLetter(rec, a.cfg.Settings.ConsumerGroup, m.limit, now)
	letter.Generation = a.cfg.Generation
	if a.cfg.Member != nil {
		letter.Generation, letter.MemberId = a.cfg.Member()
	}
	st.letter = &deadLetterState{letter: letter}
	a.writeDeadLetter(c, st)
}

// newUnreadableDeadLetter builds the envelope of an offset whose batch
// decompresses past limit bytes: where it lies, why, and nothing of the
// record, which no fetch can read (value_size 0: unknown).
func newUnreadableDeadLetter(rec *messages.Record, group string, limit int, now time.Time) *messages.DeadLetter {
	at := timestamppb.New(now)
	return &messages.DeadLetter{
		OriginalTopic:     rec.GetTopic(),
		OriginalPartition: rec.GetPartition(),
		OriginalOffset:    rec.GetOffset(),
		Error: fmt.Sprintf("the record batch holding offset %d of %s/%d decompresses past the consumer's limit of %d bytes "+
			"(a compression bomb, or a batch larger than the limit allows); no fetch can read it, so it is dead-lettered by offset, without key or value",
			rec.GetOffset(), validUTF8(rec.GetTopic()), rec.GetPartition(), limit),
		ErrorClass:       messages.ErrorClass_ERROR_CLASS_PERMANENT,
		FirstFailureTime: at,
		LastFailureTime:  at,
		ConsumerGroup:    group,
		Reason:           string(messages.ReasonUnreadableBatch),
	}
}
