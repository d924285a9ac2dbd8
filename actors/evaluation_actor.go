package actors

// EvaluationActor protocol
//
//	in  *messages.EvaluateRecord   from its PartitionActor: wait the backoff, run the Handler once
//	in  *messages.WriteDeadLetter  from its PartitionActor: write to the dead-letter topic until acknowledged
//	out *messages.RecordDone       to its parent: handled (OUTCOME_OK) or dead-lettered (OUTCOME_DEAD_LETTERED)
//	out *messages.RecordFailed     to its parent: one attempt failed, with its class
//	panic                          escalates to the parent, whose HandleFailure decides (never a restart)
//
// One EvaluationActor lives for one message: it answers, then stops itself.
// It owns nothing but its goroutine while the handler runs; the record and
// every decision about it belong to the parent.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/messages"
)

// evaluationEnv is what every EvaluationActor of one partition shares. It is
// built once per claim so spawning a child allocates no Props.
type evaluationEnv struct {
	// run is cancelled when the partition's drain deadline passes.
	run context.Context
	// draining closes when the drain starts: a record waiting for its retry
	// gives up at once rather than starting another attempt.
	draining    <-chan struct{}
	handler     Handler
	deadLetters DeadLetterWriter
	settings    Settings
	logger      *slog.Logger
	observer    Observer
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
	if wait := m.GetBackoff().AsDuration(); wait > 0 && !a.sleep(wait, true) {
		return failed(offset, m, messages.ErrorClass_ERROR_CLASS_CANCELLED, "cancelled while waiting to retry: partition draining")
	}
	err := a.handle(m.GetRecord()) // a panic escapes to the parent's supervision
	if err == nil {
		return &messages.RecordDone{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(), Outcome: messages.Outcome_OUTCOME_OK}
	}
	if reason, ok := messages.SkipReasonOf(err); ok {
		return &messages.RecordDone{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(),
			Outcome: messages.Outcome_OUTCOME_SKIPPED, SkipReason: string(reason)}
	}
	class := messages.ClassOf(err)
	if a.env.run.Err() != nil {
		// Whatever the handler said, it was interrupted: the record is
		// abandoned and redelivered, never dead-lettered for this.
		class = messages.ErrorClass_ERROR_CLASS_CANCELLED
	}
	return failed(offset, m, class, err.Error())
}

// handle runs the handler once and reports its duration by outcome.
func (a *evaluationActor) handle(r *messages.Record) (err error) {
	start := time.Now()
	outcome := "panic" // if the handler panics, the deferred report still runs
	defer func() { a.env.observer.HandlerDone(outcome, time.Since(start)) }()
	err = a.env.handler.Handle(a.env.run, r)
	outcome = "ok"
	if _, skipped := messages.SkipReasonOf(err); skipped {
		outcome = "skipped"
	} else if err != nil {
		outcome = strings.ToLower(strings.TrimPrefix(messages.ClassOf(err).String(), "ERROR_CLASS_"))
	}
	return err
}

func failed(offset int64, m *messages.EvaluateRecord, class messages.ErrorClass, text string) *messages.RecordFailed {
	return &messages.RecordFailed{Offset: offset, Epoch: m.GetEpoch(), Attempt: m.GetAttempt(), ErrorClass: class, Error: text}
}

// writeDeadLetter retries until the writer succeeds or the drain deadline
// cancels it: a record is never dropped because the dead-letter topic was
// briefly unavailable.
func (a *evaluationActor) writeDeadLetter(m *messages.WriteDeadLetter) any {
	letter := m.GetDeadLetter()
	for attempt := 1; ; attempt++ {
		err := a.tryWrite(letter)
		if err == nil {
			return &messages.RecordDone{Offset: letter.GetOriginalOffset(), Epoch: m.GetEpoch(), Attempt: letter.GetAttempts(), Outcome: messages.Outcome_OUTCOME_DEAD_LETTERED}
		}
		a.env.logger.Warn("dead-letter write failed; retrying",
			"topic", letter.GetOriginalTopic(), "partition", letter.GetOriginalPartition(),
			"offset", letter.GetOriginalOffset(), "attempt", attempt, "error", err)
		if !a.sleep(backoff(attempt+1, a.env.settings.BackoffMin, a.env.settings.BackoffMax), false) {
			return &messages.RecordFailed{Offset: letter.GetOriginalOffset(), Epoch: m.GetEpoch(), Attempt: letter.GetAttempts(),
				ErrorClass: messages.ErrorClass_ERROR_CLASS_CANCELLED, Error: "cancelled while retrying the dead-letter write: " + err.Error()}
		}
	}
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

// sleep waits d; it returns false when cancelled first. With onDrain, the
// start of a drain also cancels the wait.
func (a *evaluationActor) sleep(d time.Duration, onDrain bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	draining := a.env.draining
	if !onDrain {
		draining = nil
	}
	select {
	case <-t.C:
		return true
	case <-a.env.run.Done():
		return false
	case <-draining:
		return false
	}
}
