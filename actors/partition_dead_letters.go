package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/messages"
)

// Dead-letter writes that keep failing (topic missing, authorisation
// refused, a record the topic will not take) are never given up: the record
// stays unfinished, so nothing is lost, and the write is retried with
// backoff up to BackoffMax for as long as the claim lasts. What bounds the
// retrying is the claim itself (a drain cancels it); what ends it is an
// operator who fixes the cause, which is why the partition reports itself
// blocked (PartitionState.DeadLetterBlocked: /readyz, /status, a metric) and
// the log says what failed, at most once per deadLetterLogEvery.
const (
	// deadLetterBlockedAfter is how many consecutive failed writes make the
	// partition report itself blocked: one failure may be a blip.
	deadLetterBlockedAfter = 3
	deadLetterLogEvery     = 30 * time.Second
)

// deadLetterState is one record's dead-letter write in progress.
type deadLetterState struct {
	letter       *messages.DeadLetter
	writes       int32 // writes started
	failingSince time.Time
	lastError    string
}

// deadLetterTrouble is the partition's view of failing dead-letter writes.
type deadLetterTrouble struct {
	failing    int // records whose last write failed
	lastLogged time.Time
	suppressed int // failures not logged since lastLogged
}

// startDeadLetter gives up on st's record for reason (one of
// messages.DeadLetterReasons): its envelope is written to the dead-letter
// topic; the record finishes once the write is acknowledged.
func (a *PartitionActor) startDeadLetter(c actor.Context, st *recordState, reason messages.Reason) {
	if a.isDraining() {
		// The claim is ending: the partition's next owner decides about the
		// record (it is abandoned, and redelivered), so that a member giving
		// up its partitions never dead-letters what another may have.
		a.maybeCompleteDrain(c)
		return
	}
	if st.blame != nil {
		// What is ripe is judged for the envelope's history; the rest of
		// the cases close unjudged, and the record waits for no recovery.
		a.concluded(st, st.blame.Judge(time.Now()))
		st.blame.Close()
	}
	if st.retry != nil {
		st.retry.Stop()
		st.retry = nil
	}
	a.hold(st, false, time.Time{})
	letter := newDeadLetter(st.record, st.failures, a.cfg.Settings.ConsumerGroup, reason)
	letter.Generation = a.cfg.Generation
	if a.cfg.Member != nil {
		letter.Generation, letter.MemberId = a.cfg.Member()
	}
	st.letter = &deadLetterState{letter: letter}
	a.writeDeadLetter(c, st)
}

func (a *PartitionActor) writeDeadLetter(c actor.Context, st *recordState) {
	dl := st.letter
	dl.writes++
	msg := &messages.WriteDeadLetter{DeadLetter: dl.letter, Epoch: a.cfg.Epoch, Attempt: dl.writes}
	if wait := backoff(int(dl.writes), a.cfg.Settings.BackoffMin, a.cfg.Settings.BackoffMax); wait > 0 {
		msg.Backoff = durationpb.New(wait)
	}
	a.spawn(c, st, msg)
}

// deadLetterFailed handles one failed write: retried with backoff while the
// claim lasts, reported once it has failed deadLetterBlockedAfter times in a
// row.
func (a *PartitionActor) deadLetterFailed(c actor.Context, st *recordState, m *messages.DeadLetterFailed) {
	dl := st.letter
	if m.GetCancelled() && a.isDraining() {
		a.maybeCompleteDrain(c) // abandoned: redelivered to the next owner
		return
	}
	now := time.Now()
	a.counts.deadLetterWriteFailed()
	if dl.failingSince.IsZero() {
		dl.failingSince = now
		a.deadLetterTrouble.failing++
	}
	dl.lastError = m.GetError()
	if dl.writes >= deadLetterBlockedAfter {
		a.publishDeadLetterTrouble(st)
	}
	a.logDeadLetterFailure(st, now)
	if a.isDraining() {
		a.maybeCompleteDrain(c)
		return
	}
	a.writeDeadLetter(c, st)
}

// logDeadLetterFailure logs the first failure of a write, and then at most
// once per deadLetterLogEvery for the partition, with how many it skipped.
func (a *PartitionActor) logDeadLetterFailure(st *recordState, now time.Time) {
	t := &a.deadLetterTrouble
	if st.letter.writes > 1 && now.Sub(t.lastLogged) < deadLetterLogEvery {
		t.suppressed++
		return
	}
	a.logger.Warn("dead-letter write failed; the record stays unfinished and the write is retried until it succeeds",
		"offset", st.record.GetOffset(), "write", st.letter.writes, "failing_for", now.Sub(st.letter.failingSince).Round(time.Millisecond).String(),
		"records_failing", t.failing, "failures_not_logged", t.suppressed, "error", st.letter.lastError)
	t.lastLogged, t.suppressed = now, 0
}

// publishDeadLetterTrouble shows st's failing write on the partition's state.
func (a *PartitionActor) publishDeadLetterTrouble(st *recordState) {
	a.gauges.deadLetter.Store(&DeadLetterBlock{Offset: st.record.GetOffset(), Since: st.letter.failingSince,
		Writes: int(st.letter.writes), Error: st.letter.lastError})
}

// deadLettered runs when st's dead-letter write was acknowledged.
func (a *PartitionActor) deadLettered(st *recordState) {
	dl := st.letter
	if !dl.failingSince.IsZero() {
		a.deadLetterTrouble.failing--
		a.logger.Info("dead-letter write succeeded after failing", "offset", st.record.GetOffset(), "writes", dl.writes,
			"failed_for", time.Since(dl.failingSince).Round(time.Millisecond).String())
		if b := a.gauges.deadLetter.Load(); b != nil && b.Offset == st.record.GetOffset() {
			a.gauges.deadLetter.Store(nil)
			for _, other := range a.records {
				if other.letter != nil && !other.letter.failingSince.IsZero() && other.letter.writes >= deadLetterBlockedAfter {
					a.publishDeadLetterTrouble(other)
					break
				}
			}
		}
	}
	last := st.failures.lastAttempt()
	class, errText := last.GetErrorClass(), last.GetError()
	if last == nil { // no attempt failed: an unreadable offset, dead-lettered as admitted
		class, errText = dl.letter.GetErrorClass(), dl.letter.GetError()
	}
	a.logger.Warn("record dead-lettered", "offset", st.record.GetOffset(), "key", safeKey(st.record.GetKey()),
		"reason", dl.letter.GetReason(), "attempts", st.attempt, "own_failures", st.failures.ownCount(), "error_class", class.String(),
		"dependency", last.GetDependency(), "error", errText)
}
