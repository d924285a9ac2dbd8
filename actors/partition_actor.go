package actors

// PartitionActor protocol
//
//	in  *messages.RecordAdmitted    from the bridge, which holds one credit for the record
//	in  *unreadableAdmitted         from the bridge, which holds one credit for it: an offset no fetch can
//	                                read (its batch decompresses past the limit), dead-lettered at once
//	in  *messages.RecordDone        from a child: the record is finished (handled, skipped, or dead-lettered)
//	in  *messages.RecordFailed      from a child, or from HandleFailure after a child panic: one attempt failed
//	in  retryDue                    from its own timer, or from a dependency's recovery (blame.Book.Await):
//	                                judge the failure, then retry, dead-letter or wait for the verdict
//	in  *messages.DeadLetterFailed  from a child, or from HandleFailure: one dead-letter write failed
//	in  *messages.Drain             from the bridge (a request): answered with *messages.DrainResult
//	in  *ReleaseRecord              from an operator, through the bridge (a request): dead-letter a failing
//	                                record at its next retry; answered with *ReleaseResult
//	in  drainCancel, drainDeadline  from its own timers
//	in  sweep                       from its own timer, each second while records are in flight: warns of
//	                                attempts past their deadline and of held records
//	out EvaluationActors            spawned as children, one per attempt or dead-letter write
//	in  *actor.Terminated           from protoactor, once a child has stopped: its name is free again
//	in  flushCommit                 from itself, queued behind the messages that changed the ledger
//	out OffsetMarker.MarkOffset     the ledger's watermark when it moved forward, with the commit metadata
//	out OffsetMarker.ResetOffset    the same watermark with new commit metadata (more finished above it)
//	out Span.Advance                the watermark, for the bridge's span limit, as soon as it moves
//	out messages.Urgency            the record at the watermark is urgent in its handler's context
//	out PartitionConfig.Release     one credit and its bytes per record, when it finishes or is abandoned
//	out PartitionConfig.Lend        a record's bytes while it waits for the retry of a failure that waits for
//	                                evidence, taken back when it runs again or ends (byteBudget)
//	out *messages.HandlerSample     to PartitionConfig.Samples: each answered attempt that succeeded, or failed
//	                                waiting for a shared resource or at a dependency in outage (never a cancellation)
//	out Span.Overdraft              a few offsets past the span, as evidence for a pinned record (lendEvidence)
//	out Dependencies                each failure's case (blame.Record): opened, judged, closed
//	out *messages.DrainResult       to the Drain requester, after the final mark; then it stops
//
// It alone owns its ledger, its ordering gate, the state of its records
// (attempts, failure history and cases, retry timers, dead-letter writes)
// and the credits of admitted records; it is the only caller of MarkOffset and ResetOffset for its
// partition. A record the earlier owner of the partition finished (the
// commit metadata it found, PartitionConfig.Resume) is finished as it is
// admitted, without running. It
// supervises its children itself (actor.SupervisorStrategy): a panicking
// child is stopped, never restarted, and its record is retried or
// dead-lettered like any failure.

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/actors/blame"
	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// PartitionConfig is what the worker of one claim needs: the
// PartitionActor, or whatever BridgeConfig.NewWorker starts.
type PartitionConfig struct {
	Topic      string
	Partition  int32
	Generation int32
	// Epoch identifies the claim, uniquely in this process (it names the
	// actor, so the next claim of the same partition never collides with
	// one still stopping).
	Epoch int64
	// Resume is what the committed metadata says was finished above Start,
	// decoded and checked by the bridge; nil when there is none to trust.
	Resume *ledger.Resume
	// Reading is the token the commit metadata carries for how the claim
	// reads and runs its records (readingOf); the next owner resumes only
	// under the same one.
	Reading string
	// Span receives the watermark as it moves, for the bridge's span limit;
	// nil when nothing limits the span (actor tests without a bridge).
	Span        *Span
	Settings    Settings
	Handler     Handler
	DeadLetters DeadLetterWriter
	// Member returns the group generation and member id the claim runs
	// under now (sarama's session keeps them current through cooperative
	// rebalances), for the dead letters' envelopes; nil: Generation and no
	// member id.
	Member func() (generation int32, member string)
	// Fence, when set, is asked before each dead-letter write whether the
	// claim is still this member's (MembershipCheck): a member thrown out of
	// the group while it slept writes no dead letter for the partition; the
	// write fails and is retried, and the drain that follows abandons the
	// record to the partition's next owner.
	Fence    func(ctx context.Context) error
	Marker   OffsetMarker // from the bridge: fenced, marks after the claim ended are dropped
	Logger   *slog.Logger
	Stats    *Stats
	Observer Observer // optional
	// Dependencies tells shared outages from a record's own failures;
	// optional (nil: only record successes are known).
	Dependencies *Dependencies
	// Samples, when set, is the concurrency actor: it gets a
	// *messages.HandlerSample for each answered attempt that succeeded, or
	// failed waiting for a shared resource or transiently without the
	// failure being the record's own (never a cancellation).
	Samples *actor.PID
	// Running, when set, counts the handler calls running in the process
	// (shared by every claim): what the downstream sees, unlike the
	// credits, which records held back by the gate or waiting to retry
	// also hold.
	Running *atomic.Int64
	// Release returns n records' credits (one partition and one process
	// credit each) and their bytes (the sum of their charges against the
	// byte budget, Settings.Charge; none of them lending) to the bridge;
	// nil when nothing holds credits (actor tests without a bridge).
	Release func(n int, bytes int64)
	// Lend lends the budget the charge of a record waiting for evidence
	// (byteBudget), or takes it back (negative); nil when there is no
	// budget to lend to.
	Lend func(bytes int64)
}

// PartitionActor orders the work of one claimed partition. See the protocol
// at the top of this file.
type PartitionActor struct {
	cfg        PartitionConfig
	logger     *slog.Logger
	stats      *Stats
	counts     counts // the process's totals and the topic's
	deps       *Dependencies
	childProps *actor.Props
	// freeNames are the names of children that have stopped, for the next
	// spawns, and names how many it has made. protoactor's registry spreads
	// ids over 32,768 Go maps, and a map keeps its storage once an id has
	// landed in it: a new id per record (Spawn) grew the heap by about
	// 5 MB in a listener's first 36,000 records, still climbing (docs/
	// reliability.md, "Memory"). Reused names land in as many maps as
	// children ever ran at once. childPrefix is what protoactor puts before
	// a child's name in its id (this actor's id and "/"), kept so that each
	// child's end costs no concatenation.
	freeNames   []string
	names       int
	childPrefix string
	self        *actor.PID
	system      *actor.ActorSystem

	ledger  *ledger.Ledger
	gate    *ordering.Gate
	records map[int64]*recordState
	running int // records with a live child: an attempt (its backoff included) or a dead-letter write
	// marked and markedMeta are what was last marked; marked is -1 before
	// the first mark. sarama ignores a mark that does not move forward, so
	// new metadata for the same offset goes through ResetOffset.
	marked     int64
	markedMeta string
	// flushQueued is set while a flushCommit is in the mailbox.
	flushQueued bool

	cancelRun   context.CancelFunc // interrupts running handlers at the drain's cancel point
	draining    chan struct{}      // closed when the drain starts
	drainReply  *actor.PID
	drainTimers []*time.Timer
	cancelled   bool  // running handlers were cancelled: the drain has timed out
	drainFinish int64 // records finished since the drain started
	drained     bool  // the drain completed; the actor is stopping
	stopping    bool  // the actor is stopping without a drain (it failed, or was stopped)
	// lingering is the bytes of records abandoned while their child still
	// ran, given back once the actor (and so every child) has stopped.
	lingering int64
	// lendingKeys are the gate keys (gateKey) whose running record waits
	// for evidence: the records held behind it lend their bytes too.
	lendingKeys map[string]struct{}

	deadLetterTrouble deadLetterTrouble
	sweepTimer        *time.Timer

	env        *evaluationEnv // shared with the children
	stopped    chan struct{}  // closed when the actor has stopped, for the bridge
	gauges     *partitionGauges
	dispatcher *warmDispatcher // runs this actor's and its children's mailboxes
}

// recordState is what the actor remembers of an admitted, unfinished record.
type recordState struct {
	admitted time.Time
	record   *messages.Record
	bytes    int64 // what the record was charged against the byte budget (Settings.Charge)
	// lending: the record's bytes are lent to the records admitted
	// meanwhile: it waits for the retry of a failure that waits for
	// evidence (lendsKey), or in the gate behind such a record.
	lending, lendsKey bool
	// child is the live child working on the record; nil while the gate
	// holds the record back, and between a child's answer and the next.
	child   *actor.PID
	attempt int32 // handler attempts started
	// failures is allocated at the first failure: most records have none.
	failures *failureHistory
	// letter is set once the record is being dead-lettered.
	letter *deadLetterState
	// started is when the running attempt began.
	started time.Time
	// blame is the rule's state of a record that failed: its own failures
	// and the cases of its failures not judged yet; judging holds those
	// failures' history entries by attempt. Nil before the first failure.
	blame   *blame.Record
	judging map[int32]*messages.FailedAttempt
	// retry is the timer of the next attempt while the record waits for it.
	retry *time.Timer
	// overdue is the attempt a warning was logged for, past its deadline.
	overdue int32
	// heldSince is when the record became held (its failures not judgeable);
	// zero when it is not. heldLogged is when that was last logged.
	heldSince, heldLogged time.Time
	// releaseAsked: an operator released the record; it is dead-lettered at
	// its next retry instead of run again.
	releaseAsked bool
	// unreadable: no record, an offset no fetch can read
	// (admitUnreadable); it is dead-lettered and never takes the gate.
	unreadable bool
}

// close ends what the record holds outside the actor: its retry timer and
// its part in the dependencies' book.
func (st *recordState) close() {
	if st.retry != nil {
		st.retry.Stop()
		st.retry = nil
	}
	if st.blame != nil {
		st.blame.Close()
	}
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
		cfg.Release = func(int, int64) {}
	}
	if cfg.Lend == nil {
		cfg.Lend = func(int64) {}
	}
	if cfg.Dependencies == nil {
		cfg.Dependencies = NewDependencies(cfg.Settings.BlameConfig())
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	if cfg.Span == nil {
		cfg.Span = NewSpan(cfg.Settings.Span())
	}
	run, cancel := context.WithCancel(context.Background())
	a := &PartitionActor{
		cfg:       cfg,
		logger:    cfg.Logger.With("topic", cfg.Topic, "partition", cfg.Partition),
		stats:     cfg.Stats,
		counts:    cfg.Stats.forTopic(cfg.Topic),
		deps:      cfg.Dependencies,
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
	if cfg.Resume != nil {
		_ = a.ledger.Restore(*cfg.Resume) // a new ledger: it cannot refuse
	}
	if err := a.ledger.SetReading(cfg.Reading); err != nil {
		a.logger.Error("commit metadata written without its reading", "error", err)
	}
	env := &evaluationEnv{
		topic:       cfg.Topic,
		partition:   cfg.Partition,
		deps:        cfg.Dependencies,
		observer:    cfg.Observer,
		run:         run,
		deadlines:   newAttemptDeadlines(run, cfg.Settings.AttemptTimeout),
		draining:    a.draining,
		handler:     cfg.Handler,
		deadLetters: cfg.DeadLetters,
		fence:       cfg.Fence,
		running:     cfg.Running,
	}
	env.oldest.Store(-1)
	a.env = env
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
		actor.WithGuardian(stopOnFailure))
}

// stopOnFailure stops a partition actor that fails, rather than restarting
// it with its ledger lost. One value for every partition actor: protoactor
// keeps a guardian actor per strategy value for the life of the system, so
// a strategy made per claim left one more actor behind at every claim.
var stopOnFailure = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// Stopped closes when the actor has stopped.
func (a *PartitionActor) Stopped() <-chan struct{} { return a.stopped }

// sample tells the concurrency actor, if there is one, of one attempt.
func (a *PartitionActor) sample(c actor.Context, took *durationpb.Duration, congested bool) {
	if a.cfg.Samples != nil && took != nil {
		c.Send(a.cfg.Samples, &messages.HandlerSample{HandlerTime: took, Congested: congested})
	}
}

// Receive implements actor.Actor.
func (a *PartitionActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.RecordAdmitted:
		a.admit(c, m.GetRecord())
	case *unreadableAdmitted:
		a.admitUnreadable(c, m)
	case *messages.RecordDone:
		if st := a.answered(m.GetOffset(), m.GetAttempt(), m.GetOutcome() == messages.Outcome_OUTCOME_DEAD_LETTERED); st != nil {
			if m.GetOutcome() == messages.Outcome_OUTCOME_OK {
				a.sample(c, m.GetHandlerTime(), false)
			}
			a.finish(c, st, m)
		}
	case *messages.RecordFailed:
		if st := a.answered(m.GetOffset(), m.GetAttempt(), false); st != nil {
			a.failed(c, st, m) // samples the attempt once it knows whether the failure was the record's own
		}
	case retryDue:
		a.retryDue(c, m)
	case *messages.DeadLetterFailed:
		if st := a.answered(m.GetOffset(), m.GetAttempt(), true); st != nil {
			a.deadLetterFailed(c, st, m)
		}
	case *ReleaseRecord:
		c.Respond(a.releaseRecord(c, m))
	case sweep:
		a.sweep(c)
	case flushCommit:
		a.flushQueued = false
		if !a.drained && !a.stopping {
			a.commit()
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
	case *actor.Terminated:
		if name, ok := strings.CutPrefix(m.Who.GetId(), a.childPrefix); ok {
			a.freeNames = append(a.freeNames, name)
		}
	case *actor.Started:
		a.self, a.system = c.Self(), c.ActorSystem()
		a.childPrefix = c.Self().GetId() + "/"
		a.scheduleSweep()
	case *actor.Stopping:
		if !a.drained {
			// Stopped without a drain (the actor failed, or was stopped from
			// outside): protoactor sends Stopped only once every child has
			// terminated, and a child in its handler waits for this cancel.
			// From here answers are dropped and nothing is admitted or
			// retried; Stopped gives the credits back.
			a.stopping = true
			a.cancelRun()
		}
	case *actor.Stopped:
		a.stopSweep()
		if !a.drained {
			// Nothing more will be marked; give back the credits of what it
			// held. Records still in its mailbox are the bridge's to give
			// back when the claim ends.
			a.releaseUnfinished()
		}
		// Every child has stopped: the handlers the drain abandoned have
		// returned, and the bytes of their records come back.
		a.cfg.Release(0, a.lingering)
		a.lingering = 0
		a.dispatcher.close()
		close(a.stopped)
	}
}

func (a *PartitionActor) admit(c actor.Context, rec *messages.Record) {
	bytes := a.cfg.Settings.Charge(a.cfg.Handler, rec)
	if a.isDraining() || a.stopping {
		// Not admitted: never marked, Kafka redelivers it.
		a.cfg.Release(1, bytes)
		return
	}
	off := rec.GetOffset()
	if err := a.ledger.Admit(off); err != nil {
		// A redelivery of an offset already admitted in this claim; the first
		// delivery will finish it.
		a.logger.Warn("record dropped", "offset", off, "error", err)
		a.cfg.Release(1, bytes)
		return
	}
	a.stats.admitted.Add(1)
	if a.ledger.Restored(off) {
		a.resumed(c, rec, bytes)
		return
	}
	a.stats.inFlight.Add(1)
	st := &recordState{record: rec, admitted: time.Now(), bytes: bytes}
	a.records[off] = st
	a.gauges.admitted.Store(off)
	a.gauges.inFlight.Store(int64(a.ledger.InFlight()))
	if a.ledger.InFlight() == 1 {
		a.publishPin()
	}
	if a.gate.Admit(rec.GetKey(), off) {
		a.start(c, st)
	} else if _, ok := a.lendingKeys[a.gateKey(rec)]; ok {
		a.lendBytes(st, true) // held behind a record waiting for evidence
	}
}

// start spawns a child for the next handler attempt of st's record, at once
// (a retry's backoff was waited out by retryDue).
func (a *PartitionActor) start(c actor.Context, st *recordState) {
	st.attempt++
	st.started = time.Now()
	a.spawn(c, st, &messages.EvaluateRecord{Record: st.record, Epoch: a.cfg.Epoch, Attempt: st.attempt})
}

// spawn starts a child on msg for st.
func (a *PartitionActor) spawn(c actor.Context, st *recordState, msg any) {
	var name string
	if n := len(a.freeNames); n > 0 {
		name, a.freeNames = a.freeNames[n-1], a.freeNames[:n-1]
	} else {
		a.names++
		name = "e" + strconv.Itoa(a.names)
	}
	a.lendBytes(st, false) // running again: its bytes are alive
	if st.lendsKey {
		a.lendKey(st, false)
	}
	pid, err := c.SpawnNamed(a.childProps, name)
	if err != nil {
		// A name comes back only once its child has stopped (Terminated
		// follows the registry's removal), so it cannot be taken; were it
		// ever, a new id still runs the work.
		a.logger.Error("record actor name taken; spawning under a new one", "name", name, "error", err)
		pid = c.Spawn(a.childProps)
	}
	st.child = pid
	a.running++
	c.Send(st.child, msg)
}

// answered returns the state of the record a child's answer is about, and
// marks its child gone; nil for an answer that must be dropped: after the
// drain completed, or for a record, attempt or kind of work not running now.
func (a *PartitionActor) answered(offset int64, attempt int32, deadLetter bool) *recordState {
	if a.drained || a.stopping {
		a.counts.fence()
		a.logger.Debug("completion after the claim ended dropped", "offset", offset)
		return nil
	}
	st := a.records[offset]
	if st == nil || st.child == nil || (st.letter != nil) != deadLetter ||
		(deadLetter && st.letter.writes != attempt) || (!deadLetter && st.attempt != attempt) {
		a.logger.Warn("answer for work not running dropped", "offset", offset, "attempt", attempt)
		return nil
	}
	st.child = nil
	a.running--
	return st
}

// finish ends a record. Its credit, its key in the gate and its ledger entry
// go back whatever the ledger says, so a refused finish cannot leave a key
// busy or a credit held.
func (a *PartitionActor) finish(c actor.Context, st *recordState, done *messages.RecordDone) {
	rec := st.record
	off := rec.GetOffset()
	delete(a.records, off)
	if st.blame != nil && done.GetOutcome() != messages.Outcome_OUTCOME_DEAD_LETTERED {
		// Handled: what its calls said in others' cases got it through.
		st.blame.Done(a.deps.Book(), st.started)
	}
	st.close()
	a.hold(st, false, time.Time{})
	a.lendBytes(st, false)
	if st.lendsKey {
		a.lendKey(st, false)
	}
	a.cfg.Release(1, st.bytes)
	a.stats.inFlight.Add(-1)
	switch done.GetOutcome() {
	case messages.Outcome_OUTCOME_DEAD_LETTERED:
		a.counts.deadLetter(st.letter.letter.GetReason())
		a.deadLettered(st)
	case messages.Outcome_OUTCOME_SKIPPED:
		a.counts.skip(done.GetSkipReason())
	default:
		a.counts.succeed()
	}
	advanced, err := a.ledger.FinishRecord(off, fingerprint(rec))
	if err != nil {
		a.stats.refusedFinishes.Add(1)
		a.logger.Error("ledger refused a finish; the record's credit and key are released, its offset is left to the ledger", "offset", off, "error", err)
	}
	if !st.unreadable { // an unreadable offset never took the gate
		if next, ok := a.gate.Release(rec.GetKey()); ok {
			if nst := a.records[next]; nst != nil {
				a.start(c, nst)
			}
		}
	}
	a.gauges.inFlight.Store(int64(a.ledger.InFlight()))
	a.progressed(c, advanced)
	if a.isDraining() {
		a.drainFinish++
		a.maybeCompleteDrain(c)
	}
}

// resumed finishes, without running it, a record the earlier owner of the
// partition finished (its commit metadata says so): it takes no key in the
// gate, and its credit and bytes go back at once.
func (a *PartitionActor) resumed(c actor.Context, rec *messages.Record, bytes int64) {
	off := rec.GetOffset()
	a.cfg.Release(1, bytes)
	a.counts.resume()
	advanced, _ := a.ledger.FinishRecord(off, fingerprint(rec)) // admitted by the caller: cannot be refused
	a.gauges.admitted.Store(off)
	a.progressed(c, advanced)
}

// lendBytes starts or stops st's loan of its bytes to the byte budget
// (byteBudget: a record waiting for evidence lends what it was charged).
func (a *PartitionActor) lendBytes(st *recordState, on bool) {
	if st.lending == on || st.bytes == 0 {
		return
	}
	st.lending = on
	if on {
		a.cfg.Lend(st.bytes)
	} else {
		a.cfg.Lend(-st.bytes)
	}
}

// lendKey starts or stops the loans of st, which runs for its key in the
// gate and waits for evidence, and of the records the gate holds behind it:
// they cannot run before it, so what they hold is not alive either, and
// the room the failing record lends must not be what its own key's records
// hold back.
func (a *PartitionActor) lendKey(st *recordState, on bool) {
	if a.cfg.Settings.InFlightBytes <= 0 {
		return
	}
	a.lendBytes(st, on)
	st.lendsKey = on
	k := a.gateKey(st.record)
	if on {
		if a.lendingKeys == nil {
			a.lendingKeys = map[string]struct{}{}
		}
		a.lendingKeys[k] = struct{}{}
	} else {
		delete(a.lendingKeys, k)
	}
	a.gate.Waiting(st.record.GetKey(), func(o int64) {
		if f := a.records[o]; f != nil {
			a.lendBytes(f, on)
		}
	})
}

// gateKey is what the gate holds st's followers by: its key, or the whole
// partition in partition order.
func (a *PartitionActor) gateKey(r *messages.Record) string {
	if a.cfg.Settings.Ordering == ordering.ByPartition {
		return ""
	}
	return string(r.GetKey())
}

// progressed follows a change of the ledger: the bridge learns a new
// watermark at once, and a commit is queued behind the messages already in
// the mailbox, so a burst of finishes costs one encoding of the metadata.
func (a *PartitionActor) progressed(c actor.Context, advanced bool) {
	if advanced {
		if wm, ok := a.ledger.Watermark(); ok {
			a.cfg.Span.Advance(wm)
		}
		a.publishPin()
	}
	if !a.flushQueued {
		a.flushQueued = true
		c.Send(c.Self(), flushCommit{})
	}
}

// flushCommit asks the actor to commit what its ledger says now.
type flushCommit struct{}

// commit marks the watermark with the metadata of the offsets finished above
// it. A new watermark is marked; the same one with new metadata replaces the
// metadata (ResetOffset at the offset last marked, never below it).
func (a *PartitionActor) commit() {
	wm, meta, ok := a.ledger.Commit(a.cfg.Settings.CommitMetadataMaxBytes)
	if !ok || wm < a.marked || (wm == a.marked && meta == a.markedMeta) {
		return
	}
	MarkCommit(a.cfg.Marker, a.cfg.Topic, a.cfg.Partition, a.marked, wm, meta)
	a.marked, a.markedMeta = wm, meta
	a.gauges.committed.Store(wm)
	a.gauges.metadataBytes.Store(int64(len(meta)))
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
	a.env.oldest.Store(wm) // its attempts are urgent from now on
	a.gauges.pinnedOffset.Store(wm)
	a.gauges.pinnedKey.Store(&st.record.Key) // no copy: this runs on almost every finish
	a.gauges.pinnedSince.Store(st.admitted.UnixNano())
	a.gauges.pinnedFailure.Store(st.failures.lastAttempt())
}

func (a *PartitionActor) isDraining() bool { return isClosed(a.draining) }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// State returns what the actor has published about its partition: safe to
// call from any goroutine. It is the actor's part of the bridge's snapshot;
// before the first mark its Committed is -1, where the bridge shows the
// offset the group had committed as the claim began.
func (a *PartitionActor) State() PartitionState {
	s := PartitionState{Topic: a.cfg.Topic, Partition: a.cfg.Partition, Generation: a.cfg.Generation}
	a.gauges.snapshot(&s)
	return s
}
