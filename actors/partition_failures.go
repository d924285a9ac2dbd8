package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/actors/blame"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// The retry rule (invariant 6; docs/architecture.md, "Whose failure"). A
// failed attempt is, by class:
//   - permanent: the record is dead-lettered at once;
//   - cancelled during a drain: the record is abandoned (redelivered later);
//   - anything else (transient, unclassified, a panic): judged by package
//     blame. Its case gathers what other records' calls to the dependency it
//     names (or, naming none, the other records' outcomes) and the
//     dependency's health checks say in the window after it; it is judged
//     when its retry comes due, and Own only on evidence that the dependency
//     served others just after it. A wait for what every record shares (a
//     pool connection: messages.Congested) is never own, nor a failure that
//     could not connect (messages.CouldNotConnect).
//
// The actor waits out each retry's backoff itself (retryDue) and judges the
// cases ripe by then; it never waits for a verdict (a transient blip costs
// no more than its backoff). A record is dead-lettered once MaxAttempts of
// its failures were judged its own (blame.Record.Decide). A shared outage of any length dead-letters nothing: its
// records wait for the dependency's recovery, which wakes them at the pace it
// serves them (blame.Book.Await), or for their backoff, whichever is first.
// A failure nothing could judge (no call like it by another record, no
// check) holds the record, retried and reported (held), never dead-lettered
// on a guess; an operator can release it (ReleaseRecord). A record pinning
// its partition's watermark with nothing else of the partition running
// lends the partition a few offsets past its span (lendEvidence), so records
// of other keys run as its evidence.

// retryDue is the actor's timer, or a recovery's wake-up, for a record's
// next attempt.
type retryDue struct {
	offset  int64
	attempt int32 // the attempt that failed; stale when another has begun
}

// evidenceBatch is how many offsets past the span a pinned record lends its
// partition at each failure while nothing else of the partition runs; at
// most Settings.EvidenceOverdraft per watermark.
const evidenceBatch = 8

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
	// The failure happened when the attempt ended, not when this actor got
	// to its answer: evidence is what others started after that.
	at := now
	if m.GetStarted() != nil && m.GetHandlerTime() != nil {
		if ended := m.GetStarted().AsTime().Add(m.GetHandlerTime().AsDuration()); ended.Before(now) {
			at = ended
		}
	}
	book := a.deps.Book()
	if st.failures == nil {
		st.failures = &failureHistory{}
	}
	fa := &messages.FailedAttempt{Attempt: m.GetAttempt(), ErrorClass: class, Error: recordedError(m.GetError()),
		Dependency: m.GetDependency(), Time: timestamppb.New(at)}
	if !class.Retryable() {
		st.failures.add(fa)
		a.publishFailure(st)
		a.startDeadLetter(c, st, messages.DeadLetterReason(class, messages.Reason(m.GetValidationReason())))
		return
	}
	// A congestion signal for the adaptive limit: a wait for a shared
	// resource, or a failure at a dependency in outage. A record's own
	// failures (a host whose calls hang while the rest are served) are not
	// load: counting them shrank the limit until the failing record's calls
	// were most of the dependency's.
	if m.GetCongested() || book.Outage(book.Resolve(m.GetDependency()), at) {
		a.sample(c, m.GetHandlerTime(), true)
	}
	if st.blame == nil {
		st.blame = &blame.Record{Self: blame.Source{Topic: a.cfg.Topic, Partition: a.cfg.Partition, Offset: st.record.GetOffset()}}
		st.judging = map[int32]*messages.FailedAttempt{}
	}
	st.failures.add(fa)
	st.judging[fa.GetAttempt()] = fa
	a.counts.retried()
	self, root, off, attempt := a.self, a.system.Root, st.record.GetOffset(), m.GetAttempt()
	judged := st.blame.Fail(book, attempt, m.GetDependency(), st.started, at, causeOf(m), func() {
		root.Send(self, retryDue{offset: off, attempt: attempt})
	})
	a.concluded(st, judged)
	// A failure judged at once (congestion, or in an outage) needs no
	// evidence: nothing is lent for it.
	decided := slices.ContainsFunc(judged, func(j blame.Judged) bool { return j.Attempt == attempt })
	a.publishFailure(st)
	if a.isDraining() {
		a.maybeCompleteDrain(c) // no new attempts while draining: abandoned
		return
	}
	if st.blame.Decide(a.cfg.Settings.MaxAttempts) {
		a.giveUp(c, st)
		return
	}
	if !decided {
		a.lendEvidence(st)
		// Its evidence is what other records meet now: while it waits, the
		// bytes it and the records of its key behind it were charged let
		// them in (byteBudget).
		a.lendKey(st, true)
	}
	wait := backoff(int(st.attempt)+1, a.cfg.Settings.BackoffMin, a.cfg.Settings.BackoffMax)
	if reach, by := st.blame.MayReach(a.cfg.Settings.MaxAttempts); reach {
		// The verdicts pending may dead-letter it: wait for them rather
		// than run an attempt more (a hanging record's costs AttemptTimeout).
		wait = max(wait, time.Until(by))
	}
	a.scheduleRetry(st, wait)
}

// scheduleRetry sends the actor a retryDue for st's failed attempt after wait.
func (a *PartitionActor) scheduleRetry(st *recordState, wait time.Duration) {
	if st.retry != nil {
		st.retry.Stop()
	}
	self, root, due := a.self, a.system.Root, retryDue{offset: st.record.GetOffset(), attempt: st.attempt}
	st.retry = time.AfterFunc(max(wait, 0), func() { root.Send(self, due) })
}

// retryDue judges what is ripe of a record's failures, then starts its next
// attempt, or dead-letters it.
func (a *PartitionActor) retryDue(c actor.Context, m retryDue) {
	st := a.records[m.offset]
	if st == nil || st.child != nil || st.letter != nil || st.attempt != m.attempt || a.isDraining() || a.stopping {
		return // finished, running, dead-lettering, or a stale timer or wake-up
	}
	a.concluded(st, st.blame.Judge(time.Now()))
	switch {
	case st.blame.Decide(a.cfg.Settings.MaxAttempts):
		a.giveUp(c, st)
	case st.releaseAsked:
		a.startDeadLetter(c, st, messages.ReasonReleased)
	default:
		if st.retry != nil {
			st.retry.Stop()
			st.retry = nil
		}
		st.blame.Retry()
		a.start(c, st)
	}
}

// giveUp dead-letters a record whose own failures reached MaxAttempts, for
// the class of its last failure.
func (a *PartitionActor) giveUp(c actor.Context, st *recordState) {
	a.startDeadLetter(c, st, messages.DeadLetterReason(st.failures.lastAttempt().GetErrorClass(), ""))
}

// concluded books each verdict on st's failed attempts: its history entry,
// the stats, the tally behind the listener's warnings, and whether the
// record is held.
func (a *PartitionActor) concluded(st *recordState, judged []blame.Judged) {
	for _, j := range judged {
		fa := st.judging[j.Attempt]
		if fa == nil {
			continue
		}
		delete(st.judging, j.Attempt)
		v := j.Verdict
		verdict := cloneAttempt(fa)
		verdict.Blame = blameOf(v)
		verdict.Own = v == blame.Own
		st.failures.replace(fa, verdict)
		switch v {
		case blame.Own:
			a.counts.retriedOwn()
		case blame.NoEvidence:
			a.counts.retriedHeld()
		default:
			a.counts.retriedShared()
		}
		a.deps.failedAttempt(verdict.GetDependency(), recordID{a.cfg.Topic, a.cfg.Partition, st.record.GetOffset()}, v != blame.Own, verdict.GetError())
		// Sampled: attempts 1, 2, 4, 8... of a record, so an outage retried
		// for minutes does not print a line per attempt; the listener's
		// warning per dependency counts them all.
		if n := verdict.GetAttempt(); n&(n-1) == 0 {
			a.logger.Debug("attempt failed; retrying", "offset", st.record.GetOffset(), "key", safeKey(st.record.GetKey()),
				"attempt", n, "error_class", verdict.GetErrorClass().String(), "dependency", verdict.GetDependency(),
				"blame", v.String(), "own_failures", st.blame.Own, "error", verdict.GetError())
		}
	}
	if len(judged) > 0 {
		a.hold(st, st.blame.Held, time.Now())
		a.publishFailure(st)
	}
}

// publishFailure shows st's last failed attempt while it pins the watermark.
func (a *PartitionActor) publishFailure(st *recordState) {
	if wm, _ := a.ledger.Watermark(); wm == st.record.GetOffset() {
		a.gauges.pinnedFailure.Store(st.failures.last)
	}
}

func blameOf(v blame.Verdict) messages.Blame {
	switch v {
	case blame.Own:
		return messages.Blame_BLAME_OWN
	case blame.Shared:
		return messages.Blame_BLAME_SHARED
	case blame.NoEvidence:
		return messages.Blame_BLAME_NO_EVIDENCE
	case blame.Congestion:
		return messages.Blame_BLAME_CONGESTION
	}
	return messages.Blame_BLAME_UNSPECIFIED
}

func cloneAttempt(f *messages.FailedAttempt) *messages.FailedAttempt {
	return &messages.FailedAttempt{Attempt: f.GetAttempt(), ErrorClass: f.GetErrorClass(), Error: f.GetError(),
		Dependency: f.GetDependency(), Time: f.GetTime(), Own: f.GetOwn(), Blame: f.GetBlame()}
}

// lendEvidence grants the partition evidenceBatch offsets past its span when
// st pins the watermark and nothing else of the partition runs: the records
// of other keys there are what can tell whether its dependency serves. In
// partition order nothing else of the partition may run, so nothing is lent
// (other partitions, and health checks, are its evidence). At most
// Settings.EvidenceOverdraft offsets per watermark.
func (a *PartitionActor) lendEvidence(st *recordState) {
	if a.cfg.Settings.Ordering == ordering.ByPartition || a.running > 0 {
		return
	}
	wm, ok := a.ledger.Watermark()
	if !ok || wm != st.record.GetOffset() {
		return
	}
	granted := a.cfg.Span.Overdrawn()
	if limit := int64(a.cfg.Settings.EvidenceOverdraft()); granted < limit {
		a.cfg.Span.Overdraft(wm, min(granted+evidenceBatch, limit))
		a.stats.evidenceLent.Add(min(evidenceBatch, limit-granted))
	}
}

// HandleFailure implements actor.SupervisorStrategy for the children; it
// runs on this actor's goroutine. A panicking child is stopped (never
// restarted, which would repeat its work silently) and the work it was doing
// counts as failed, through the mailbox like any other answer, so running
// counts, gate and credits stay right wherever the child panicked.
func (a *PartitionActor) HandleFailure(_ *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, message any) {
	supervisor.StopChildren(child)
	a.counts.panicked()
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
		a.logger.Error("record actor failed with no record in its care", "child", child.GetId(), "reason", fmt.Sprint(reason))
		return
	}
	var text string
	var stack []any
	if p, ok := reason.(*HandlerPanic); ok {
		text = fmt.Sprintf("panicked: %s\n%s", p, p.Stack)
		stack = []any{"stack", p.Stack}
	} else {
		text = "panicked: " + PanicValue(reason)
	}
	if st.letter != nil {
		a.logger.Warn("dead-letter write panicked", "offset", off, "reason", fmt.Sprint(reason))
		a.system.Root.Send(a.self, &messages.DeadLetterFailed{Offset: off, Epoch: a.cfg.Epoch, Attempt: st.letter.writes,
			Error: "dead-letter write " + text})
		return
	}
	// The panic is the handler failing for this record: booked as such, as
	// an error it returned would be (the child never got to book it).
	a.deps.Book().Call(RecordsDependency, blame.Source{Topic: a.cfg.Topic, Partition: a.cfg.Partition, Offset: off}, st.started, time.Now(), false)
	a.logger.Warn("handler panicked", append([]any{"offset", off, "attempt", st.attempt, "reason", PanicValue(reason)}, stack...)...)
	a.system.Root.Send(a.self, &messages.RecordFailed{Offset: off, Epoch: a.cfg.Epoch, Attempt: st.attempt,
		ErrorClass: messages.ErrorClass_ERROR_CLASS_PANIC, Error: "handler " + text, Started: timestamppb.New(st.started)})
}

// causeOf is what the rule hears of why an attempt failed.
func causeOf(m *messages.RecordFailed) blame.Cause {
	switch {
	case m.GetCongested():
		return blame.CauseCongestion
	case m.GetUnreachable():
		return blame.CauseUnreachable
	}
	return blame.CauseAny
}
