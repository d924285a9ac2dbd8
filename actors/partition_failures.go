package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/messages"
)

// The retry rule (invariant 6). A failed attempt is, by class:
//   - permanent: the record is dead-lettered at once;
//   - cancelled during a drain: the record is abandoned (redelivered later);
//   - unclassified or a panic: an own failure;
//   - transient, spent waiting for what every record shares (a connection of
//     the pool: messages.Congested): never an own failure;
//   - other transient: an own failure only when the dependency it names is
//     serving (Dependencies.ownFailure), judged since the record last failed
//     (since the attempt began, for its first failure): it served a call
//     since and most of its recent calls were served; or, when it served no
//     call since (the record may be what stops the others), a probe of it
//     passed since, none failed, and no other record failed at it. A
//     failure that names no dependency, or one never observed, is judged
//     by the records of the process the same way (RecordsDependency, never
//     probed). Otherwise the trouble is shared (an outage, or a dependency
//     shedding load) and the failure does not count.
//
// A record is retried, with backoff, until MaxAttempts of its failures are
// its own; then it is dead-lettered. So a shared outage of any length
// dead-letters nothing, and a record that keeps failing while its neighbours
// are served is dead-lettered within Settings.OwnFailureBound (alone, with
// a probe: each own failure also waits for a probe after the previous one,
// a second apart in the consumer). What is not told apart: a call the
// record itself made earlier in the same attempt counts as served like any
// other.
func (a *PartitionActor) failed(c actor.Context, st *recordState, m *messages.RecordFailed) {
	class := m.GetErrorClass()
	if class == messages.ErrorClass_ERROR_CLASS_CANCELLED {
		if a.isDraining() {
			// Abandoned: stays unfinished in the ledger, never marked.
			a.maybeCompleteDrain(c)
			return
		}
		// Cancelled outside a drain means the handler's own context gave up,
		// not ours: an ordinary failure.
		class = messages.ErrorClass_ERROR_CLASS_UNKNOWN
	}
	now := time.Now()
	since := m.GetStarted().AsTime() // the first failure: since the attempt began
	if st.failures != nil {
		since = st.failures.last.GetTime().AsTime()
	}
	own := a.isOwnFailure(class, m, since)
	// A congestion signal for the adaptive limit: a wait for a shared
	// resource, or a transient failure the record does not own (its
	// dependency is failing others too). A record's own failures (a host
	// whose calls hang while the rest are served) are not load: counting
	// them shrank the limit until the failing record's calls were most of
	// the dependency's, which then read as a shared outage, retried
	// without limit instead of dead-lettered.
	if m.GetCongested() || (class == messages.ErrorClass_ERROR_CLASS_TRANSIENT && !own) {
		a.sample(c, m.GetHandlerTime(), true)
	}
	if class == messages.ErrorClass_ERROR_CLASS_TRANSIENT && st.failures == nil {
		// A record adds one failure at most, however often it is retried:
		// one retried often must not weigh more than one that failed once.
		a.deps.Observe(RecordsDependency, false)
	}
	if st.failures == nil {
		st.failures = &failureHistory{}
	}
	st.failures.add(&messages.FailedAttempt{Attempt: m.GetAttempt(), ErrorClass: class, Error: m.GetError(),
		Dependency: m.GetDependency(), Time: timestamppb.New(now), Own: own})
	if wm, _ := a.ledger.Watermark(); wm == st.record.GetOffset() {
		a.gauges.pinnedFailure.Store(st.failures.last)
	}
	if class.Retryable() && int(st.failures.own) < a.cfg.Settings.MaxAttempts {
		if a.isDraining() {
			a.maybeCompleteDrain(c) // no new attempts while draining: abandoned
			return
		}
		if own {
			a.stats.retriedOwn.Add(1)
		} else {
			a.stats.retriedShared.Add(1)
		}
		a.deps.failedAttempt(m.GetDependency(), recordID{a.cfg.Topic, a.cfg.Partition, st.record.GetOffset()}, !own, m.GetError())
		// Sampled: attempts 1, 2, 4, 8... of a record, so an outage
		// retried for minutes does not print a line per attempt; the
		// listener's warning per dependency counts them all.
		if attempt := m.GetAttempt(); attempt&(attempt-1) == 0 {
			a.logger.Debug("attempt failed; retrying", "offset", st.record.GetOffset(), "key", string(st.record.GetKey()),
				"attempt", attempt, "error_class", class.String(), "dependency", m.GetDependency(), "own", own,
				"own_failures", st.failures.own, "error", m.GetError())
		}
		a.start(c, st)
		return
	}
	a.startDeadLetter(c, st, messages.DeadLetterReason(class, messages.Reason(m.GetValidationReason())))
}

// isOwnFailure applies the rule above to one failed attempt; since is when
// the record last failed, or when its first attempt began. The evidence that
// a dependency serves others is looked for since the last failure, not only
// during the attempt: an attempt that fails at once (a refused call) leaves
// no time for a neighbour to be served within it, and such a record would
// otherwise be retried as a shared outage for ever while everything around
// it succeeds (its first failure still needs service during the attempt, so
// it takes one attempt more). Whether the trouble is shared is told by the
// recent calls: a dependency failing for many records drops below the
// healthy share within a few calls. What cannot be told apart: a dependency
// down exactly when this record calls it and serving every other call in
// between counts as this record's own trouble.
func (a *PartitionActor) isOwnFailure(class messages.ErrorClass, m *messages.RecordFailed, since time.Time) bool {
	switch class {
	case messages.ErrorClass_ERROR_CLASS_UNKNOWN, messages.ErrorClass_ERROR_CLASS_PANIC:
		return true
	case messages.ErrorClass_ERROR_CLASS_TRANSIENT:
		if m.GetCongested() {
			return false // waiting for what every record shares: congestion
		}
		if m.GetStarted() == nil {
			return false // no start time: cannot tell, so assume shared
		}
		return a.deps.ownFailure(m.GetDependency(), recordID{a.cfg.Topic, a.cfg.Partition, m.GetOffset()}, since)
	}
	return false
}

// HandleFailure implements actor.SupervisorStrategy for the children; it
// runs on this actor's goroutine. A panicking child is stopped (never
// restarted, which would repeat its work silently) and the work it was doing
// counts as failed, through the mailbox like any other answer, so running
// counts, gate and credits stay right wherever the child panicked.
func (a *PartitionActor) HandleFailure(_ *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, message any) {
	supervisor.StopChildren(child)
	a.stats.panics.Add(1)
	var off int64
	var st *recordState
	switch m := actor.UnwrapEnvelopeMessage(message).(type) {
	case *messages.EvaluateRecord:
		off = m.GetRecord().GetOffset()
	case *messages.WriteDeadLetter:
		off = m.GetDeadLetter().GetOriginalOffset()
	default:
		// Outside a record's message (a system message, or none): find the
		// record by the child that was working on it. By the child itself,
		// not its id: children reuse the names of stopped ones, and a record
		// whose child panicked holds it until the failure queued for it
		// arrives, while its name may already run the next record's child.
		for o, s := range a.records {
			if s.child == child {
				off = o
				break
			}
		}
	}
	if s := a.records[off]; s != nil && s.child != nil && s.child == child {
		st = s
	}
	if st == nil {
		a.logger.Error("evaluation actor failed with no record in its care", "child", child.GetId(), "reason", fmt.Sprint(reason))
		return
	}
	text := fmt.Sprintf("panicked: %v", reason)
	if st.letter != nil {
		a.logger.Warn("dead-letter write panicked", "offset", off, "reason", fmt.Sprint(reason))
		a.system.Root.Send(a.self, &messages.DeadLetterFailed{Offset: off, Epoch: a.cfg.Epoch, Attempt: st.letter.writes,
			Error: "dead-letter write " + text})
		return
	}
	a.logger.Warn("handler panicked", "offset", off, "attempt", st.attempt, "reason", fmt.Sprint(reason))
	a.system.Root.Send(a.self, &messages.RecordFailed{Offset: off, Epoch: a.cfg.Epoch, Attempt: st.attempt,
		ErrorClass: messages.ErrorClass_ERROR_CLASS_PANIC, Error: "handler " + text})
}
