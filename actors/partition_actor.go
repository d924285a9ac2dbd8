package actors

// PartitionActor protocol
//
//	in  *messages.RecordAdmitted  from the bridge, which holds one credit for the record
//	in  *messages.RecordDone      from an EvaluationActor: the record is finished
//	in  *messages.RecordFailed    from an EvaluationActor, or from HandleFailure after a child panic
//	in  *messages.Drain           from the bridge (a request): answered with *messages.DrainResult
//	in  drainDeadline             from its own timer
//	out EvaluationActors          spawned as children, one per attempt or dead-letter write
//	out OffsetMarker.MarkOffset   the ledger's watermark, only when it moved forward
//	out *messages.DrainResult     to the Drain requester, after the final mark; then it stops
//
// It alone owns its ledger, its ordering gate, the failure history of its
// records and the credits of admitted records; it is the only caller of
// MarkOffset for its partition. It supervises its children itself
// (actor.SupervisorStrategy): a panicking child is stopped, never restarted,
// and its record is retried or dead-lettered like any failure.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// Drain timer messages, sent by the PartitionActor to itself. The drain
// budget splits in two: handlers run until cancelAt, then get the rest (the
// cancel grace) to return from their cancellation, so a cancelled handler is
// normally gone before the next owner of the partition starts the same key.
type (
	drainCancel   struct{}
	drainDeadline struct{}
)

// cancelGrace is the part of a drain budget reserved for cancelled handlers
// to return: a tenth, at most two seconds.
func cancelGrace(budget time.Duration) time.Duration {
	return min(budget/10, 2*time.Second)
}

// PartitionConfig is what the worker of one claim needs: the
// PartitionActor, or whatever BridgeConfig.NewWorker starts.
type PartitionConfig struct {
	Topic      string
	Partition  int32
	Generation int32
	// Epoch identifies the claim, uniquely in this process. Completions
	// carrying another epoch are dropped: they belong to an older claim of
	// the same partition.
	Epoch       int64
	Settings    Settings
	Handler     Handler
	DeadLetters DeadLetterWriter
	Marker      OffsetMarker // from the bridge: fenced, marks after the claim ended are dropped
	Logger      *slog.Logger
	Stats       *Stats
	Observer    Observer // optional
	// Release returns n records' credits (one partition and one process
	// credit each) to the bridge; nil when nothing holds credits (actor
	// tests without a bridge).
	Release func(n int)
}

// PartitionActor orders the work of one claimed partition. See the protocol
// at the top of this file.
type PartitionActor struct {
	cfg        PartitionConfig
	logger     *slog.Logger
	stats      *Stats
	childProps *actor.Props
	self       *actor.PID
	system     *actor.ActorSystem

	ledger  *ledger.Ledger
	gate    *ordering.Gate
	records map[int64]*recordState
	running int   // children alive: attempts (incl. waiting for backoff) and dead-letter writes
	marked  int64 // last offset passed to MarkOffset, -1 before the first

	cancelRun   context.CancelFunc // interrupts running handlers at the drain deadline
	draining    chan struct{}      // closed when the drain starts
	drainReply  *actor.PID
	drainTimers []*time.Timer
	cancelled   bool  // running handlers were cancelled: the drain has timed out
	drainFinish int64 // records finished since the drain started
	drained     bool  // the drain completed; the actor is stopping

	stopped    chan struct{} // closed when the actor has stopped, for the bridge
	gauges     *partitionGauges
	dispatcher *warmDispatcher // runs this actor's and its children's mailboxes
}

// recordState is what the actor remembers of an admitted, unfinished record.
type recordState struct {
	admitted time.Time
	record   *messages.Record
	failures failureHistory
}

// NewPartitionActor returns the actor for cfg. Spawn it with Props.
func NewPartitionActor(cfg PartitionConfig) *PartitionActor {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Stats == nil {
		cfg.Stats = &Stats{}
	}
	if cfg.Release == nil {
		cfg.Release = func(int) {}
	}
	run, cancel := context.WithCancel(context.Background())
	a := &PartitionActor{
		cfg:       cfg,
		logger:    cfg.Logger.With("topic", cfg.Topic, "partition", cfg.Partition),
		stats:     cfg.Stats,
		ledger:    ledger.New(cfg.Settings.InFlightPerPartition),
		gate:      ordering.NewGate(cfg.Settings.Ordering),
		records:   make(map[int64]*recordState, cfg.Settings.InFlightPerPartition),
		marked:    -1,
		cancelRun: cancel,
		draining:  make(chan struct{}),
		stopped:   make(chan struct{}),
		gauges:    newPartitionGauges(),
		// 300 is protoactor's default throughput.
		dispatcher: newWarmDispatcher(300),
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	env := &evaluationEnv{
		observer:    cfg.Observer,
		run:         run,
		draining:    a.draining,
		handler:     cfg.Handler,
		deadLetters: cfg.DeadLetters,
		settings:    cfg.Settings,
		logger:      a.logger,
	}
	// An evaluationActor holds nothing but the shared env, so every child
	// can be the same value: no allocation per spawn.
	child := &evaluationActor{env: env}
	a.childProps = actor.PropsFromProducer(func() actor.Actor { return child },
		actor.WithDispatcher(a.dispatcher), actor.WithMailbox(newChildMailbox))
	return a
}

// Props returns props that spawn this actor. A failure of the actor itself
// stops it rather than restarting it with an empty ledger, which could mark
// past records the lost ledger still held.
func (a *PartitionActor) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(a.dispatcher),
		actor.WithGuardian(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
}

// Stopped closes when the actor has stopped.
func (a *PartitionActor) Stopped() <-chan struct{} { return a.stopped }

// Receive implements actor.Actor.
func (a *PartitionActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.RecordAdmitted:
		a.admit(c, m.GetRecord())
	case *messages.RecordDone:
		if st := a.current(m.GetEpoch(), m.GetOffset()); st != nil {
			a.running--
			a.finish(c, st, m)
		}
	case *messages.RecordFailed:
		if st := a.current(m.GetEpoch(), m.GetOffset()); st != nil {
			a.running--
			a.failed(c, st, m)
		}
	case *messages.Drain:
		a.startDrain(c, m)
	case drainCancel:
		if !a.drained {
			a.cancelled = true
			a.cancelRun()
		}
	case drainDeadline:
		if !a.drained {
			a.completeDrain(c, true)
		}
	case *actor.Started:
		a.self, a.system = c.Self(), c.ActorSystem()
	case *actor.Stopped:
		if !a.drained {
			// Stopped without a drain (the actor failed, or the system is
			// shutting down): nothing more will be marked; return the credits
			// so other partitions are not starved.
			a.cancelRun()
			a.releaseUnfinished()
		}
		a.dispatcher.close()
		close(a.stopped)
	}
}

func (a *PartitionActor) admit(c actor.Context, rec *messages.Record) {
	if a.isDraining() {
		// Not admitted: never marked, Kafka redelivers it.
		a.cfg.Release(1)
		return
	}
	off := rec.GetOffset()
	if err := a.ledger.Admit(off); err != nil {
		// A redelivery of an offset already admitted in this claim; the first
		// delivery will finish it.
		a.logger.Warn("record dropped", "offset", off, "error", err)
		a.cfg.Release(1)
		return
	}
	a.stats.admitted.Add(1)
	a.stats.inFlight.Add(1)
	st := &recordState{record: rec, admitted: time.Now()}
	a.records[off] = st
	a.gauges.admitted.Store(off)
	a.gauges.inFlight.Store(int64(a.ledger.InFlight()))
	if a.ledger.InFlight() == 1 {
		a.publishPin()
	}
	if a.gate.Admit(rec.GetKey(), off) {
		a.start(c, st, 1)
	}
}

// start spawns a child for the given attempt of st's record.
func (a *PartitionActor) start(c actor.Context, st *recordState, attempt int32) {
	msg := &messages.EvaluateRecord{Record: st.record, Epoch: a.cfg.Epoch, Attempt: attempt}
	if wait := backoff(int(attempt), a.cfg.Settings.BackoffMin, a.cfg.Settings.BackoffMax); wait > 0 {
		msg.Backoff = durationpb.New(wait)
	}
	c.Send(c.Spawn(a.childProps), msg)
	a.running++
}

// current returns the state of an in-flight record of this claim, or nil for
// a completion that must be dropped.
func (a *PartitionActor) current(epoch, offset int64) *recordState {
	if epoch != a.cfg.Epoch || a.drained {
		a.stats.fenced.Add(1)
		a.logger.Debug("late completion dropped", "offset", offset, "epoch", epoch, "current_epoch", a.cfg.Epoch)
		return nil
	}
	st := a.records[offset]
	if st == nil {
		a.logger.Warn("completion for a record not in flight dropped", "offset", offset)
	}
	return st
}

func (a *PartitionActor) finish(c actor.Context, st *recordState, done *messages.RecordDone) {
	rec := st.record
	off := rec.GetOffset()
	delete(a.records, off)
	advanced, err := a.ledger.Finish(off)
	if err != nil {
		a.logger.Error("ledger refused a finish", "offset", off, "error", err)
		return
	}
	a.cfg.Release(1)
	a.stats.inFlight.Add(-1)
	switch done.GetOutcome() {
	case messages.Outcome_OUTCOME_DEAD_LETTERED:
		a.stats.deadLettered.Add(1)
	case messages.Outcome_OUTCOME_SKIPPED:
		a.stats.skip(done.GetSkipReason())
	default:
		a.stats.succeeded.Add(1)
	}
	if next, ok := a.gate.Release(rec.GetKey()); ok {
		a.start(c, a.records[next], 1)
	}
	a.gauges.inFlight.Store(int64(a.ledger.InFlight()))
	if advanced {
		a.markWatermark()
		a.publishPin()
	}
	if a.isDraining() {
		a.drainFinish++
		a.maybeCompleteDrain(c)
	}
}

func (a *PartitionActor) failed(c actor.Context, st *recordState, m *messages.RecordFailed) {
	off := st.record.GetOffset()
	class := m.GetErrorClass()
	if class == messages.ErrorClass_ERROR_CLASS_CANCELLED {
		if a.isDraining() {
			// Abandoned: stays unfinished in the ledger, never marked.
			a.maybeCompleteDrain(c)
			return
		}
		// Cancelled outside a drain means the handler's own context gave up,
		// not ours: an ordinary failure worth retrying.
		class = messages.ErrorClass_ERROR_CLASS_UNKNOWN
	}
	st.failures.attempts = m.GetAttempt()
	st.failures.add(time.Now(), class, m.GetError())

	// Transient failures (a dependency down or slow) are retried for as long
	// as it takes: dead-lettering a good record because the database was
	// restarting would lose it. Unclassified failures and panics get
	// MaxAttempts, then go to the dead-letter topic.
	transient := class == messages.ErrorClass_ERROR_CLASS_TRANSIENT
	if class.Retryable() && (transient || int(m.GetAttempt()) < a.cfg.Settings.MaxAttempts) {
		if a.isDraining() {
			a.maybeCompleteDrain(c) // no new attempts while draining: abandoned
			return
		}
		a.stats.retried.Add(1)
		a.logger.Debug("attempt failed; retrying", "offset", off, "key", string(st.record.GetKey()),
			"attempt", m.GetAttempt(), "error_class", class.String(), "error", m.GetError())
		a.start(c, st, m.GetAttempt()+1)
		return
	}
	a.logger.Warn("record dead-lettered", "offset", off, "key", string(st.record.GetKey()),
		"attempts", m.GetAttempt(), "error_class", class.String(), "error", m.GetError())
	letter := newDeadLetter(st.record, &st.failures, a.cfg.Settings.ConsumerGroup)
	c.Send(c.Spawn(a.childProps), &messages.WriteDeadLetter{DeadLetter: letter, Epoch: a.cfg.Epoch})
	a.running++
}

// HandleFailure implements actor.SupervisorStrategy for the children: a
// panicking EvaluationActor is stopped (never restarted, which would repeat
// its work silently) and its attempt counts as failed.
func (a *PartitionActor) HandleFailure(_ *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, message any) {
	supervisor.StopChildren(child)
	a.stats.panics.Add(1)
	m, ok := actor.UnwrapEnvelopeMessage(message).(*messages.EvaluateRecord)
	if !ok {
		a.logger.Error("evaluation actor failed outside a record", "child", child.GetId(), "reason", fmt.Sprint(reason))
		return
	}
	a.logger.Warn("handler panicked", "offset", m.GetRecord().GetOffset(), "attempt", m.GetAttempt(), "reason", fmt.Sprint(reason))
	// Delivered through the mailbox so it takes the same path as any failure.
	a.system.Root.Send(a.self, &messages.RecordFailed{
		Offset: m.GetRecord().GetOffset(), Epoch: m.GetEpoch(), Attempt: m.GetAttempt(),
		ErrorClass: messages.ErrorClass_ERROR_CLASS_PANIC, Error: fmt.Sprintf("handler panicked: %v", reason),
	})
}

func (a *PartitionActor) markWatermark() {
	wm, ok := a.ledger.Watermark()
	if !ok || wm <= a.marked {
		return
	}
	a.cfg.Marker.MarkOffset(a.cfg.Topic, a.cfg.Partition, wm, "")
	a.marked = wm
	a.gauges.committed.Store(wm)
}

// publishPin records which record now holds the watermark, and since when.
func (a *PartitionActor) publishPin() {
	if a.ledger.InFlight() == 0 {
		return
	}
	wm, _ := a.ledger.Watermark()
	st := a.records[wm]
	if st == nil {
		return
	}
	a.gauges.pinnedOffset.Store(wm)
	a.gauges.pinnedKey.Store(&st.record.Key) // no copy: this runs on almost every finish
	a.gauges.pinnedSince.Store(st.admitted.UnixNano())
}

func (a *PartitionActor) isDraining() bool { return isClosed(a.draining) }

func (a *PartitionActor) startDrain(c actor.Context, m *messages.Drain) {
	if a.isDraining() {
		return
	}
	close(a.draining)
	a.drainReply = c.Sender()
	held := a.gate.Held()
	a.gate.Clear() // held records never start; they stay unfinished
	timeout := m.GetTimeout().AsDuration()
	if timeout <= 0 {
		timeout = a.cfg.Settings.DrainTimeout
	}
	a.logger.Debug("draining", "running", a.running, "held", held, "timeout", timeout)
	if a.running == 0 {
		a.completeDrain(c, false)
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	a.drainTimers = []*time.Timer{
		time.AfterFunc(timeout-cancelGrace(timeout), func() { root.Send(self, drainCancel{}) }),
		time.AfterFunc(timeout, func() { root.Send(self, drainDeadline{}) }),
	}
}

func (a *PartitionActor) maybeCompleteDrain(c actor.Context) {
	if a.running == 0 && !a.drained {
		a.completeDrain(c, a.cancelled)
	}
}

// completeDrain cancels what still runs, marks the final watermark, answers
// the requester and stops. Cancelled and held records are abandoned: their
// offsets are never marked, so Kafka redelivers them.
func (a *PartitionActor) completeDrain(c actor.Context, timedOut bool) {
	a.drained = true
	for _, t := range a.drainTimers {
		t.Stop()
	}
	a.cancelRun()
	a.markWatermark()
	abandoned := a.releaseUnfinished()
	result := &messages.DrainResult{Watermark: a.marked, Finished: a.drainFinish, Abandoned: int64(abandoned), TimedOut: timedOut}
	a.logger.Debug("partition drained", "watermark", a.marked, "finished", a.drainFinish, "abandoned", abandoned, "timed_out", timedOut)
	if a.drainReply != nil {
		c.Send(a.drainReply, result)
	}
	c.Stop(c.Self())
}

// releaseUnfinished gives back the credits of every unfinished record.
func (a *PartitionActor) releaseUnfinished() int {
	n := a.ledger.InFlight()
	a.gauges.inFlight.Store(0)
	a.cfg.Release(n)
	a.stats.abandoned.Add(int64(n))
	a.stats.inFlight.Add(int64(-n))
	clear(a.records)
	return n
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
