package actors

// EvaluationActor protocol
//
//	in  *messages.EvaluateRecord    from its PartitionActor: run the Handler once, at once
//	in  *messages.WriteDeadLetter   from its PartitionActor: wait the backoff, write to the dead-letter topic once
//	out *messages.RecordDone        to its parent: handled (OUTCOME_OK), skipped (OUTCOME_SKIPPED) or
//	                                dead-lettered and acknowledged (OUTCOME_DEAD_LETTERED)
//	out *messages.RecordFailed      to its parent: the attempt failed, with its class, dependency and, for a
//	                                broken message, its validation reason
//	out *messages.DeadLetterFailed  to its parent: the dead-letter write failed or was cancelled
//	out Dependencies                the attempt's outcome, booked as a call to blame.Handler by its record
//	panic                           escalates to the parent, whose HandleFailure decides (never a restart);
//	                                a handler's carries its stack (*HandlerPanic)
//
// One EvaluationActor lives for one message: it answers, then stops itself.
// It owns nothing but its goroutine while the handler runs; the record and
// every decision about it (retry, when, give up, dead-letter) belong to the
// parent. The handler's context names the record (runningRecord), so the
// calls the handler reports under it are booked as this record's.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/actors/blame"
	"github.com/patchflow/patchflow/messages"
)

// evaluationEnv is what every EvaluationActor of one partition shares. It is
// built once per claim so spawning a child allocates no Props.
type evaluationEnv struct {
	topic     string
	partition int32
	// deps books each attempt's outcome as a call to blame.Handler.
	deps *Dependencies
	// run is cancelled when the partition's drain deadline passes.
	run context.Context
	// draining closes when the drain starts: a record waiting for its retry
	// gives up at once rather than starting another attempt.
	draining <-chan struct{}
	// deadlines gives each attempt its context: run, with the attempt timeout.
	deadlines   *attemptDeadlines
	handler     Handler
	deadLetters DeadLetterWriter
	// fence, when set, says whether the claim is still this member's before
	// each dead-letter write (PartitionConfig.Fence).
	fence    func(context.Context) error
	observer Observer
	// running counts the handler calls running in the process, for the
	// adaptive limit; nil when nothing counts them.
	running *atomic.Int64
	// oldest is the offset of the record holding the partition's committed
	// offset back, published by the partition actor; its attempts are urgent
	// (messages.Urgency) for the handler's shared resources.
	oldest atomic.Int64
}

// runningRecord is what a handler's context carries of its record: which
// record it is (the calls reported under the context are booked as its
// own: sourceOf), and its urgency, true while it is the oldest unfinished
// record of its partition.
type runningRecord struct {
	env     *evaluationEnv
	offset  int64
	attempt int32
}

func (u runningRecord) Urgent() bool { return u.env.oldest.Load() == u.offset }

// AttemptOf is the attempt a handler's context runs (1 for the first), and
// false for a context that is not a handler's.
func AttemptOf(ctx context.Context) (int32, bool) {
	r, ok := messages.UrgencyOf(ctx).(runningRecord)
	return r.attempt, ok
}

type evaluationActor struct {
	env *evaluationEnv
}

// Receive implements actor.Actor.
func (a *evaluationActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.EvaluateRecord:
		c.Send(c.Parent(), a.evaluate(m))
		c.Stop(c.Self())
	case *messages.WriteDeadLetter:
		c.Send(c.Parent(), a.writeDeadLetter(m))
		c.Stop(c.Self())
	}
}

func (a *evaluationActor) evaluate(m *messages.EvaluateRecord) any {
	offset := m.GetRecord().GetOffset()
	started := time.Now()
	err := a.handle(m.GetRecord(), m.GetAttempt(), started) // a panic escapes to the parent's supervision
	ended := time.Now()
	took := durationpb.New(ended.Sub(started))
	a.book(offset, started, ended, err)
	if err == nil {
		return &messages.RecordDone{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(), Outcome: messages.Outcome_OUTCOME_OK, HandlerTime: took}
	}
	if reason, ok := messages.SkipReasonOf(err); ok {
		return &messages.RecordDone{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(),
			Outcome: messages.Outcome_OUTCOME_SKIPPED, SkipReason: string(reason), HandlerTime: took}
	}
	class := messages.ClassOf(err)
	if a.env.run.Err() != nil {
		// Whatever the handler said, it was interrupted: the record is
		// abandoned and redelivered, never dead-lettered for this.
		class = messages.ErrorClass_ERROR_CLASS_CANCELLED
	}
	f := failed(offset, m, class, err.Error())
	f.Dependency = messages.DependencyOf(err)
	f.Unreachable = messages.CouldNotConnect(err)
	if f.Dependency == "" && messages.DialFailed(err) {
		f.Dependency = messages.DependencyNetwork
	}
	f.Congested = messages.IsCongestion(err)
	f.Started = timestamppb.New(started)
	f.HandlerTime = took
	if reason, ok := messages.ValidationReasonOf(err); ok {
		f.ValidationReason = string(reason)
	}
	return f
}

// book reports the attempt's outcome as a call to blame.Handler by its
// record: served when the record was handled (done, skipped or refused as
// broken), failed otherwise. A cancellation says nothing of the handler, and
// a panic is booked by the parent (it never returns here).
func (a *evaluationActor) book(offset int64, started, ended time.Time, err error) {
	served := true
	if err != nil {
		if _, skipped := messages.SkipReasonOf(err); !skipped {
			switch messages.ClassOf(err) {
			case messages.ErrorClass_ERROR_CLASS_PERMANENT:
			case messages.ErrorClass_ERROR_CLASS_CANCELLED:
				return
			default:
				served = false
			}
		}
	}
	if a.env.run.Err() != nil {
		return // interrupted by the drain
	}
	a.env.deps.Book().Call(RecordsDependency, blame.Source{Topic: a.env.topic, Partition: a.env.partition, Offset: offset}, started, ended, served)
}

// handle runs the handler once and reports its duration by outcome.
func (a *evaluationActor) handle(r *messages.Record, attempt int32, start time.Time) (err error) {
	outcome := "panic" // if the handler panics, the deferred report still runs
	defer func() { a.env.observer.HandlerDone(outcome, time.Since(start)) }()
	if r := a.env.running; r != nil {
		r.Add(1)
		defer r.Add(-1)
	}
	ctx := messages.WithUrgency(a.env.deadlines.context(start), runningRecord{env: a.env, offset: r.GetOffset(), attempt: attempt})
	returned := false
	defer func() {
		// Not by recover's value: panic(nil) under GODEBUG=panicnil=1
		// recovers nil, and must reach the parent's supervision as a
		// failed attempt, never a success. runtime.Goexit (t.FailNow in a
		// test's handler) also recovers nothing: its attempt fails and is
		// retried the same way, but the goroutine still exits after
		// protoactor's recover, leaving the child's mailbox unfinished (a
		// handler must not call it).
		if !returned {
			v := recover()
			if v == nil {
				v = "the handler neither returned nor panicked with a value (panic(nil) or runtime.Goexit)"
			}
			panic(&HandlerPanic{Value: v, Stack: RecoveredStack()})
		}
	}()
	err = a.env.handler.Handle(ctx, r)
	returned = true
	switch _, skipped := messages.SkipReasonOf(err); {
	case err == nil:
		outcome = "ok"
	case skipped:
		outcome = "skipped"
	default:
		outcome = strings.ToLower(strings.TrimPrefix(messages.ClassOf(err).String(), "ERROR_CLASS_"))
	}
	return err
}

func failed(offset int64, m *messages.EvaluateRecord, class messages.ErrorClass, text string) *messages.RecordFailed {
	return &messages.RecordFailed{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(), ErrorClass: class, Error: text}
}

// writeDeadLetter writes the envelope once, after its backoff. A drain
// cancels the wait; the write itself runs under the partition's run context,
// which the drain cancels at its cancel point.
func (a *evaluationActor) writeDeadLetter(m *messages.WriteDeadLetter) any {
	letter := m.GetDeadLetter()
	offset := letter.GetOriginalOffset()
	if wait := m.GetBackoff().AsDuration(); wait > 0 && !a.sleep(wait) {
		return &messages.DeadLetterFailed{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(), Cancelled: true,
			Error: "cancelled while waiting to retry the dead-letter write: partition draining"}
	}
	if a.env.fence != nil {
		if err := a.env.fence(a.env.run); err != nil {
			return &messages.DeadLetterFailed{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(),
				Error: "not written: the claim may no longer be this member's: " + err.Error(), Cancelled: a.env.run.Err() != nil}
		}
	}
	if err := a.tryWrite(letter); err != nil {
		return &messages.DeadLetterFailed{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(),
			Error: err.Error(), Cancelled: a.env.run.Err() != nil}
	}
	return &messages.RecordDone{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(), Outcome: messages.Outcome_OUTCOME_DEAD_LETTERED}
}

// tryWrite calls the writer, turning a panic into an error so that it is
// retried like any failed write.
func (a *evaluationActor) tryWrite(letter *messages.DeadLetter) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dead-letter writer panicked: %v", r)
		}
	}()
	return a.env.deadLetters.Write(a.env.run, letter)
}

// sleep waits d; it returns false when the drain starts (or the run is
// cancelled) first.
func (a *evaluationActor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.env.run.Done():
		return false
	case <-a.env.draining:
		return false
	}
}
