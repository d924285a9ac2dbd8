package actors

// Bridge protocol (a plain goroutine per claim, not an actor)
//
//	in  sarama ConsumeClaim(session, claim)   one call per claimed partition
//	out spawns one PartitionActor per claim   named with topic, partition, generation and claim epoch
//	                                          (or another ClaimWorker, from BridgeConfig.NewWorker)
//	out *messages.RecordAdmitted              only while it holds a partition credit and a process credit
//	out *unreadableAdmitted                   an offset no fetch can read (unreadable.go), under the same credits
//	out *messages.Drain                       when the claim ends: sarama closed the claim (revoked), the
//	                                          session context done (rebalance, shutdown), the actor stopped,
//	                                          or everything up to unreadable offsets finished (the claim
//	                                          restarts past them); whether or not the bridge is waiting for a credit
//	in  *messages.DrainResult                 then ConsumeClaim returns
//
// The bridge never marks offsets; it only fences the marker once its claim has
// ended, so a late partition actor cannot mark for a partition it lost. It
// owns the claim's credits: what the worker does not give back (records lost
// with a dead actor) it gives back itself when the claim ends.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/messages"
)

// drainGrace is how long the bridge waits past the drain timeout for the
// actor's answer; the actor answers right at its deadline, so this only
// matters when the actor has failed.
const drainGrace = 2 * time.Second

// BridgeConfig is what a Bridge needs.
type BridgeConfig struct {
	System      *actor.ActorSystem
	Settings    Settings
	Handler     Handler
	DeadLetters DeadLetterWriter
	Logger      *slog.Logger
	Stats       *Stats
	// WrapMarker, when set, wraps each claim's marker; tests use it to watch marks.
	WrapMarker func(OffsetMarker) OffsetMarker
	// ClaimMarkers, when set, gives each claim a marker of its own in place
	// of the session (a transactional mode commits the marks itself). It
	// is opened as the claim starts, before the commit metadata is read,
	// and tried again with backoff until it opens or the claim ends (its
	// records wait meanwhile); End is called once the claim's last mark is
	// in, before ConsumeClaim returns, so the next owner reads what it
	// committed.
	ClaimMarkers func(ctx context.Context, topic string, partition int32) (ClaimMarker, error)
	// Observer, when set, receives timings for metrics.
	Observer Observer
	// Dependencies is where the handler's calls are recorded per dependency
	// (a Handler that is a DependencyReporter is wired to it); the retry
	// rule reads it. Nil: the bridge keeps its own.
	Dependencies *Dependencies
	// IdleSettle overrides the package's IdleSettle (tests shorten it).
	IdleSettle time.Duration
	// SettleProbe, when set, lets an idle claim with offsets left below the
	// high watermark be confirmed as having consumed everything (transaction
	// markers, aborted records), so it reads as caught up. Nil: such a claim
	// always shows the gap as lag.
	SettleProbe SettleProbe
	// Committed, when set, reads the group's committed offset and metadata
	// of a partition as a claim starts, so the records an earlier owner
	// finished above the committed offset are not run again (see
	// resumeOf). Nil: every claim replays from its committed offset.
	Committed CommittedReader
	// Membership, when set, is asked before each dead-letter write whether
	// the claim's member is still in the group at its generation
	// (PartitionConfig.Fence). Nil: dead letters are written unasked.
	Membership MembershipCheck
	// Isolation is the isolation level the group's consumers read with;
	// the commit metadata records it (with Settings.Ordering), and a claim
	// resumes only from metadata written under the same. sarama's zero
	// value is read_uncommitted, as in sarama's default configuration.
	Isolation sarama.IsolationLevel
	// NewWorker, when set, replaces the PartitionActor as the worker of each
	// claim. The benchmark uses it to run a plain goroutine pool behind the
	// same bridge, credits, ledger and gate; production leaves it nil.
	NewWorker func(PartitionConfig) (ClaimWorker, error)
	// Lease, when set, holds a member's admission while the group's
	// coordinator has not confirmed it for a session timeout
	// (session_lease.go). Nil: a member cut off from its coordinator runs
	// records until sarama ends its session.
	Lease *LeaseConfig
	// Pauses, when set, are the topics the application paused: their
	// records wait unadmitted (Pauses). Nil: nothing is paused.
	Pauses *Pauses
	// Unreadable, when set, gets a claim past the record batches its
	// consumer cannot decode (over sarama.MaxDecompressedBatchSize): each
	// offset no fetch can read is dead-lettered by itself, and the claim
	// restarts past them (unreadable.go). It needs a worker that takes
	// unreadable offsets (the PartitionActor does). Nil: such a claim
	// stays where it is, its fetch failing, as sarama leaves it.
	Unreadable *UnreadableConfig
}

// Bridge is a sarama.ConsumerGroupHandler that hands each claimed partition to
// a PartitionActor. One Bridge may serve several consumer-group members of a
// process; they share its process-wide credits.
//
// Guarantee: at most Settings.InFlightPerPartition records of a claim and
// Settings.InFlightTotal records of the process are admitted and unfinished
// at any time, and at most Settings.InFlightBytes bytes of them (RecordSizer;
// one record larger than that runs alone), twice that while records waiting
// for a verdict on their failure lend theirs; ConsumeClaim returns within DrainTimeout plus a small grace
// after its claim ends.
type Bridge struct {
	cfg   BridgeConfig
	total processPool
	// bytes is the process-wide byte budget; nil when InFlightBytes is 0.
	bytes *byteBudget
	// concurrency is the adaptive limit's actor and what it publishes; nil
	// and empty when the limit is fixed.
	concurrency      *actor.PID
	concurrencyState atomic.Pointer[ConcurrencyState]
	// running counts the handler calls running, for the adaptive limit.
	running  atomic.Int64
	epochs   atomic.Int64
	logger   *slog.Logger
	claims   sync.Map // epoch -> *claimEntry, the claims running now
	sessions atomic.Int64
	// leases holds each session's lease (session -> *leaseEntry) from
	// Setup to Cleanup; empty without BridgeConfig.Lease.
	leases sync.Map
	// reading is readingOf(Settings.Ordering, Isolation).
	reading string
}

// claimEntry is what Partitions reads of a running claim.
type claimEntry struct {
	topic      string
	partition  int32
	generation int32
	gauges     *partitionGauges
	claim      sarama.ConsumerGroupClaim
	credits    *claimCredits
	bytes      *claimBytes
	span       *Span
	ahead      *readAhead
	// waitingSince is when the bridge began to wait for a credit (or for
	// room in the byte budget) with a
	// record in hand (unix nanoseconds); 0 when it is not waiting.
	waitingSince atomic.Int64
	// lease is the claim's session's lease; nil without BridgeConfig.Lease.
	lease *sessionLease
	// unconfirmedSince is when the bridge began to wait, with a record in
	// hand, for the coordinator to confirm the member (unix nanoseconds);
	// 0 when it is not waiting.
	unconfirmedSince atomic.Int64
	// pausedSince is when the bridge began to wait, with a record in hand,
	// for the application to resume the claim's topic (Pauses); 0 when not.
	pausedSince atomic.Int64
	// spanBlockedSince is when the bridge began to wait, with a record in
	// hand, for the watermark to move within the span (unix nanoseconds);
	// 0 when it is not waiting.
	spanBlockedSince atomic.Int64
	// lastDelivered is when the claim last delivered a record, or when it
	// began; lastFetchError when its consumer last reported an error (unix
	// nanoseconds, 0: never). Together they tell a partition that has
	// consumed everything there is from one whose fetch has trouble.
	lastDelivered, lastFetchError atomic.Int64
	settle                        settleState
	// release asks the claim's worker to give up on one of its records
	// (ReleaseRecord); nil for a worker that cannot.
	release func(offset int64) (*ReleaseResult, error)
	// unreadable is the claim's way past batches its consumer cannot
	// decode; nil without BridgeConfig.Unreadable.
	unreadable *unreadableState
}

// settleState is what the bridge learnt from its SettleProbe about a claim:
// the position and high watermark at which the broker confirmed there was
// nothing more to deliver, and whether a probe is under way.
type settleState struct {
	mu        sync.Mutex
	probing   bool
	probedAt  time.Time
	confirmed bool
	position  int64
	hwm       int64
}

// IdleSettle is how long a claim must have delivered nothing, with nothing
// buffered, in flight or waiting for a credit and no consumer error, before
// the offsets between its position and the high watermark are taken for
// what they are then: not records (transaction markers, records of aborted
// transactions under read_committed), which no fetch will ever deliver. It is
// ten times sarama's default fetch wait.
const IdleSettle = 5 * time.Second

// NewBridge validates cfg and returns a Bridge.
func NewBridge(cfg BridgeConfig) (*Bridge, error) {
	if err := cfg.Settings.Validate(); err != nil {
		return nil, err
	}
	if (cfg.System == nil && cfg.NewWorker == nil) || cfg.Handler == nil || cfg.DeadLetters == nil {
		return nil, fmt.Errorf("bridge needs a handler, a dead-letter writer, and an actor system (unless NewWorker is set)")
	}
	if cfg.Lease != nil {
		if err := cfg.Lease.validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Stats == nil {
		cfg.Stats = &Stats{}
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	if cfg.Dependencies == nil {
		cfg.Dependencies = NewDependencies(cfg.Settings.BlameConfig())
	}
	if cfg.IdleSettle <= 0 {
		cfg.IdleSettle = IdleSettle
	}
	if r, ok := cfg.Handler.(DependencyReporter); ok {
		r.ReportDependenciesTo(cfg.Dependencies.Observe)
	}
	b := &Bridge{cfg: cfg, logger: cfg.Logger, reading: readingOf(cfg.Settings.Ordering, cfg.Isolation)}
	if n := cfg.Settings.InFlightBytes; n > 0 {
		b.bytes = newByteBudget(n)
	}
	if cfg.Settings.Concurrency != ConcurrencyAdaptive {
		b.total = newCredits(cfg.Settings.InFlightTotal)
		return b, nil
	}
	if cfg.System == nil {
		return nil, fmt.Errorf("adaptive concurrency needs an actor system: its samples come from partition actors")
	}
	pool := newAdaptiveCredits(cfg.Settings.InFlightTotal)
	a, err := newConcurrencyActor(cfg.Settings.LimitConfig(), pool, &b.running, &b.concurrencyState)
	if err != nil {
		return nil, err
	}
	b.total = pool
	b.concurrency = cfg.System.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	return b, nil
}

// runningCalls is the counter of running handler calls when the limit is
// adaptive; nil (nothing counted) when it is fixed.
func (b *Bridge) runningCalls() *atomic.Int64 {
	if b.concurrency == nil {
		return nil
	}
	return &b.running
}

// Close stops the adaptive limit's actor, if any. Call it once every claim
// has ended (the group members have stopped); the limit then stays where it
// was.
func (b *Bridge) Close() {
	if b.concurrency != nil {
		_ = b.cfg.System.Root.StopFuture(b.concurrency).Wait()
	}
}

// Concurrency returns the process-wide in-flight limit now.
func (b *Bridge) Concurrency() ConcurrencyState {
	if s := b.concurrencyState.Load(); s != nil {
		return *s
	}
	g := b.cfg.Settings.InFlightTotal
	return ConcurrencyState{Mode: ConcurrencyFixed.String(), Limit: g, Floor: g, Ceiling: g}
}

// Dependencies returns where the handler's calls and the records' retried
// failures are recorded per dependency.
func (b *Bridge) Dependencies() *Dependencies { return b.cfg.Dependencies }

// Settings returns the pipeline's settings the bridge runs with.
func (b *Bridge) Settings() Settings { return b.cfg.Settings }

// Stats returns the counters the bridge's partition actors update.
func (b *Bridge) Stats() *Stats { return b.cfg.Stats }

// Partitions returns the state of every partition claimed now, ordered by
// topic and partition.
func (b *Bridge) Partitions() []PartitionState {
	var out []PartitionState
	now := time.Now()
	b.claims.Range(func(_, v any) bool {
		e := v.(*claimEntry)
		s := PartitionState{Topic: e.topic, Partition: e.partition, Generation: e.generation,
			Committed: -1, Admitted: -1, Start: e.claim.InitialOffset(), HighWatermark: e.claim.HighWaterMarkOffset(),
			Buffered: len(e.claim.Messages()) + e.ahead.queued(), InFlightLimit: b.cfg.Settings.InFlightPerPartition}
		if ns := e.waitingSince.Load(); ns > 0 {
			s.WaitingForCredit = time.Unix(0, ns)
		}
		if ns := e.spanBlockedSince.Load(); ns > 0 {
			s.SpanBlocked = time.Unix(0, ns)
		}
		if ns := e.unconfirmedSince.Load(); ns > 0 {
			s.Unconfirmed = time.Unix(0, ns)
		}
		if ns := e.pausedSince.Load(); ns > 0 {
			s.Paused = time.Unix(0, ns)
		}
		s.SpanLimit = e.span.Limit()
		s.LastDelivered = time.Unix(0, e.lastDelivered.Load())
		if ns := e.lastFetchError.Load(); ns > 0 {
			s.LastFetchError = time.Unix(0, ns)
		}
		if e.gauges != nil {
			e.gauges.snapshot(&s)
		}
		if s.Committed < 0 {
			// Nothing marked yet: the group's committed offset stands, when
			// sarama began the claim at it.
			s.Committed = max(e.claim.InitialOffset(), -1)
		}
		s.Settled = s.idle(now, b.cfg.IdleSettle) && b.confirmSettled(e, s.Position(), s.HighWatermark, now)
		out = append(out, s)
		return true
	})
	slices.SortFunc(out, func(a, b PartitionState) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// Joined reports whether at least one group member of this bridge is in a
// session (has joined its group).
func (b *Bridge) Joined() bool { return b.sessions.Load() > 0 }

// Setup implements sarama.ConsumerGroupHandler.
func (b *Bridge) Setup(s sarama.ConsumerGroupSession) error {
	b.sessions.Add(1)
	b.logger.Info("joined consumer group", "member_id", s.MemberID(), "generation", s.GenerationID(), "claims", formatClaims(s.Claims()))
	if cfg := b.cfg.Lease; cfg != nil {
		log := b.logger.With("member_id", s.MemberID(), "generation", s.GenerationID())
		ctx, cancel := context.WithCancel(s.Context())
		e := &leaseEntry{lease: newSessionLease(cfg.SessionTimeout, time.Now(), log), cancel: cancel, done: make(chan struct{})}
		b.leases.Store(s, e)
		go func() {
			defer close(e.done)
			e.lease.keep(ctx, *cfg, func() (int32, string) { return s.GenerationID(), s.MemberID() })
		}()
	}
	return nil
}

// leaseEntry is a session's lease and the goroutine keeping it.
type leaseEntry struct {
	lease  *sessionLease
	cancel context.CancelFunc
	done   chan struct{}
}

// leaseOf returns s's lease, nil without one. Leases are kept by session
// (sarama's sessions are pointers), not by generation: a cooperative
// rebalance moves a session to the next generation, its claims kept.
func (b *Bridge) leaseOf(s sarama.ConsumerGroupSession) *sessionLease {
	if v, ok := b.leases.Load(s); ok {
		return v.(*leaseEntry).lease
	}
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (b *Bridge) Cleanup(s sarama.ConsumerGroupSession) error {
	if v, ok := b.leases.LoadAndDelete(s); ok {
		e := v.(*leaseEntry)
		e.cancel()
		<-e.done
	}
	b.sessions.Add(-1)
	b.logger.Info("left consumer group session", "member_id", s.MemberID(), "generation", s.GenerationID())
	return nil
}

// ConsumeClaim implements sarama.ConsumerGroupHandler: it feeds one claimed
// partition to a new PartitionActor and drains it when the claim ends.
func (b *Bridge) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	epoch := b.epochs.Add(1)
	generation := session.GenerationID()
	var marker OffsetMarker = session
	if b.cfg.WrapMarker != nil {
		marker = b.cfg.WrapMarker(marker)
	}
	fence := &fencedMarker{inner: marker}
	cc := newClaimCredits(b.cfg.Settings.InFlightPerPartition, b.total)
	cb := newClaimBytes(b.bytes)
	log := b.logger.With("topic", claim.Topic(), "partition", claim.Partition(), "generation", generation)
	span := NewSpan(b.cfg.Settings.Span())
	// The claim's end is watched from the start, the commit metadata's
	// read included: a revoke while the coordinator is slow must not wait
	// for the read.
	aheadCtx, stopAhead := context.WithCancel(session.Context())
	entry := &claimEntry{topic: claim.Topic(), partition: claim.Partition(), generation: generation, claim: claim, credits: cc, bytes: cb, span: span, lease: b.leaseOf(session),
		ahead: newReadAhead(aheadCtx, claim.Messages(), readAheadRecords, readAheadBytes)}
	entry.lastDelivered.Store(time.Now().UnixNano())
	pauser, canPause := claim.(pausable)
	if b.cfg.Unreadable != nil && canPause {
		entry.unreadable = newUnreadableState()
	}
	ended := watchClaimEnd(claim, entry, log)
	if ended == nil {
		// A claim without Errors(): its end is what the read-ahead sees,
		// watched by the credit and span waits too. sarama's claims have
		// Errors(); this path is for test doubles, and has a limit: while
		// the metadata read runs nothing takes from the read-ahead, so a
		// claim holding more than its bound behind the revoke is not seen
		// to end until the read does (5 s).
		ended = entry.ahead.ended
	}
	var own ClaimMarker
	if b.cfg.ClaimMarkers != nil {
		if own = b.openClaimMarker(session.Context(), ended, claim, log); own == nil {
			stopAhead()
			entry.ahead.stop()
			return nil // the claim ended first: nothing was admitted
		}
		marker = own
		if b.cfg.WrapMarker != nil {
			marker = b.cfg.WrapMarker(marker)
		}
		fence = &fencedMarker{inner: marker}
	}
	resume := b.readResume(session.Context(), ended, claim, log)
	wc := PartitionConfig{
		Topic: claim.Topic(), Partition: claim.Partition(), Generation: generation, Epoch: epoch,
		Resume: resume, Reading: b.reading, Span: span,
		Member:   func() (int32, string) { return session.GenerationID(), session.MemberID() },
		Settings: b.cfg.Settings, Handler: b.cfg.Handler, DeadLetters: b.cfg.DeadLetters,
		Marker: fence, Logger: b.logger.With("generation", generation), Stats: b.cfg.Stats,
		Observer: b.cfg.Observer, Dependencies: b.cfg.Dependencies, Samples: b.concurrency, Running: b.runningCalls(),
		Release: func(n int, bytes int64) {
			if err := cc.release(n); err != nil {
				b.creditFault(log, err)
			}
			if err := cb.release(bytes); err != nil {
				b.creditFault(log, err)
			}
		},
		Lend: func(bytes int64) {
			if err := cb.lend(bytes); err != nil {
				b.creditFault(log, err)
			}
		},
	}
	if check := b.cfg.Membership; check != nil {
		wc.Fence = func(ctx context.Context) error {
			if fence.isClosed() {
				return errClaimEnded
			}
			return check(ctx, session.GenerationID(), session.MemberID(), claim.Topic(), claim.Partition())
		}
	}
	var worker ClaimWorker
	if b.cfg.NewWorker != nil {
		w, err := b.cfg.NewWorker(wc)
		if err != nil {
			stopAhead()
			entry.ahead.stop()
			return fmt.Errorf("start the worker of %s/%d: %w", claim.Topic(), claim.Partition(), err)
		}
		worker = w
	} else {
		w, err := spawnPartitionActor(b.cfg.System, wc)
		if err != nil {
			stopAhead()
			entry.ahead.stop()
			return fmt.Errorf("spawn %s: %w", partitionActorName(wc), err)
		}
		worker, entry.gauges = w, w.pa.gauges
		entry.release = w.release
	}
	started := claimStartAttrs(claim.InitialOffset(), claim.HighWaterMarkOffset())
	if resume != nil {
		started = append(started, "resume_finished", resume.FinishedCount(), "resume_unfinished", resume.Unfinished(), "resume_end", resume.End)
	}
	log.Info("claim started", started...)
	if _, ok := worker.(unreadableWorker); ok && entry.unreadable != nil {
		go b.watchUnreadable(aheadCtx, claim, pauser, entry, ended, log)
	}
	b.cfg.Observer.ClaimStarted(claim.Topic(), claim.Partition())
	b.claims.Store(epoch, entry)
	defer b.claims.Delete(epoch)

	reason := b.feed(session.Context(), claim, worker, entry, ended)
	stopAhead()
	entry.ahead.stop() // what it still holds is not admitted: Kafka delivers it again

	start := time.Now()
	r, err := worker.Drain(b.cfg.Settings.DrainTimeout)
	fence.close()
	if own != nil {
		own.End() // the claim's last mark is in: no mark comes after the fence
	}
	// Whatever the worker did not give back (records in a dead actor's
	// mailbox, or admitted after it stopped) comes back now, exactly once.
	n, cerr := cc.close()
	if cerr != nil {
		b.creditFault(log, cerr)
	} else if n > 0 {
		log.Warn("gave back credits of records the partition worker never finished or abandoned", "credits", n, "reason", reason)
	}
	// The bytes wait for the actor to stop: protoactor stops it once every
	// child has, and a handler the drain abandoned holds its record's
	// memory until it returns, whatever the credits say.
	closeBytes := func() {
		if nb := cb.close(); nb > 0 {
			log.Warn("gave back bytes of records the partition worker never finished or abandoned", "bytes", nb, "reason", reason)
		}
	}
	if aw, ok := worker.(*actorWorker); ok && !isClosed(aw.Stopped()) {
		go func() {
			<-aw.Stopped()
			closeBytes()
		}()
	} else {
		closeBytes()
	}
	b.cfg.Observer.DrainDone(time.Since(start), err != nil || r.GetTimedOut())
	if err != nil {
		log.Error("partition worker did not answer the drain; nothing more will be marked", "reason", reason, "error", err)
		return nil
	}
	if r != nil {
		ended := []any{"reason", reason}
		// What the claim leaves committed: its last mark, or else the
		// group's committed offset it began at (omitted when neither).
		if c := max(r.GetWatermark(), claim.InitialOffset()); c >= 0 {
			ended = append(ended, "committed", c)
		}
		log.Info("claim ended", append(ended, "finished_in_drain", r.GetFinished(), "abandoned", r.GetAbandoned(),
			"timed_out", r.GetTimedOut(), "drain", time.Since(start).Round(time.Millisecond))...)
	}
	// The session may live on (a cooperative revoke): returning is what lets
	// sarama commit the final mark and hand the partition over.
	return nil
}

// confirmSettled reports whether the broker confirmed that a claim idle at
// position, with the high watermark at hwm, has nothing more to deliver. It
// never waits: without a fresh confirmation it starts a probe (at most one
// at a time per claim, and at most one per IdleSettle) and answers no until
// the probe says yes for this very position and high watermark.
func (b *Bridge) confirmSettled(e *claimEntry, position, hwm int64, now time.Time) bool {
	if hwm <= position {
		return true // nothing below the high watermark: nothing to confirm
	}
	probe := b.cfg.SettleProbe
	if probe == nil {
		return false
	}
	st := &e.settle
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.confirmed && st.position == position && st.hwm == hwm {
		return true
	}
	if st.probing || now.Sub(st.probedAt) < b.cfg.IdleSettle {
		return false
	}
	st.probing, st.probedAt = true, now
	go func() {
		ok, err := probe(e.topic, e.partition, position, hwm)
		if err != nil {
			b.logger.Debug("settle probe failed", "topic", e.topic, "partition", e.partition, "position", position, "error", err)
		}
		st.mu.Lock()
		st.probing = false
		st.confirmed, st.position, st.hwm = ok, position, hwm
		st.mu.Unlock()
	}()
	return false
}

// creditFault reports a credit given back more often than taken: a bug in
// the pipeline's accounting, loud rather than a bridge blocked forever.
func (b *Bridge) creditFault(log *slog.Logger, err error) {
	b.cfg.Stats.creditErrors.Add(1)
	log.Error("credit accounting fault", "error", err)
}

// feed admits records while the claim lasts and returns why it ended. ended
// closes when sarama closes the claim; watching it, also while waiting for a
// credit, is what lets a revoked claim drain at once when every credit is
// held by records that do not finish (a cooperative revoke leaves the
// session context alive). Besides sarama's records it admits, in offset
// order, what the walk past an unreadable batch hands it (records and
// unreadable offsets; watchUnreadable), and ends the claim once everything
// up to them has finished.
func (b *Bridge) feed(ctx context.Context, claim sarama.ConsumerGroupClaim, worker ClaimWorker, entry *claimEntry, ended <-chan struct{}) string {
	stopped := worker.Stopped()
	ahead := entry.ahead
	cc, span := entry.credits, entry.span
	var walked <-chan unreadableItem // nil (never ready) without a way past unreadable batches
	if entry.unreadable != nil {
		walked = entry.unreadable.items
	}
	unreadable, _ := worker.(unreadableWorker)
	last := int64(-1) // the last offset admitted
	walking := false  // records come from the walk past unreadable batches
	for first := true; ; first = false {
		if ahead.isEnded() || isClosed(ended) {
			// Records read ahead when sarama let the claim go are dropped:
			// admitting them would hold the revoke for as long as their
			// credits take.
			return "revoked"
		}
		var msg *sarama.ConsumerMessage
		lost := false // msg stands for an offset no fetch can read
		select {
		case msg = <-ahead.out:
			ahead.took(msg)
			entry.lastDelivered.Store(time.Now().UnixNano())
		case it := <-walked:
			if it.done {
				// The claim's consumer cannot fetch past the unreadable
				// offsets: once everything admitted up to them has
				// finished (and is marked), the claim ends, the member's
				// session with it, and the next session's consumer starts
				// at the committed offset, past them.
				if !span.waitPast(ctx, last, stopped, ended) {
					return endReason(ctx, stopped)
				}
				return restartPastUnreadable
			}
			walking = true
			msg, lost = it.record, it.record == nil
			if lost {
				msg = &sarama.ConsumerMessage{Topic: entry.topic, Partition: entry.partition, Offset: it.offset}
			}
			entry.lastDelivered.Store(time.Now().UnixNano())
		case <-ahead.ended:
			return "revoked"
		case <-ctx.Done():
			return "session ended"
		case <-stopped:
			return "partition worker stopped"
		case <-ended:
			return "revoked"
		}
		if walking && msg.Offset <= last {
			continue // sarama delivered it too: it is admitted already
		}
		if first {
			// No watermark of the claim can be below its first record.
			span.Advance(msg.Offset)
		}
		var rec *messages.Record
		var n int64
		if !lost {
			rec = recordOf(msg)
			n = b.cfg.Settings.Charge(b.cfg.Handler, rec)
		}
		// Every wait below may outlast the session lease: a record is
		// admitted only if the lease holds once everything is in hand, or
		// else it gives its credit and bytes back and waits for the lease.
		for {
			if !b.cfg.Pauses.wait(ctx, entry.topic, entry.markPaused, stopped, ended) {
				return endReason(ctx, stopped)
			}
			if !b.waitLease(ctx, entry, stopped, ended) {
				return endReason(ctx, stopped)
			}
			if !span.admits(msg.Offset, last) {
				entry.spanBlockedSince.Store(time.Now().UnixNano())
				ok := span.wait(ctx, msg.Offset, last, stopped, ended)
				entry.spanBlockedSince.Store(0)
				if !ok {
					return endReason(ctx, stopped)
				}
			}
			if !cc.tryAcquire() {
				entry.waitingSince.Store(time.Now().UnixNano())
				ok := cc.acquire(ctx, stopped, ended)
				entry.waitingSince.Store(0)
				if !ok {
					// msg is not admitted and so never marked: Kafka redelivers it.
					return endReason(ctx, stopped)
				}
			}
			if !lost && !entry.bytes.tryAcquire(n) {
				entry.waitingSince.Store(time.Now().UnixNano())
				ok := entry.bytes.acquire(ctx, n, stopped, ended)
				entry.waitingSince.Store(0)
				if !ok {
					if err := cc.release(1); err != nil { // not admitted: its credits go back
						b.creditFault(b.logger, err)
					}
					return endReason(ctx, stopped)
				}
			}
			// Paused or lapsed meanwhile (a wait for a credit, bytes or the
			// span can be long): give them back and wait again.
			if l := entry.lease; (l == nil || !l.lapsedNow()) && !b.cfg.Pauses.pausedNow(entry.topic) {
				break
			}
			if err := cc.release(1); err != nil {
				b.creditFault(b.logger, err)
			}
			if !lost {
				if err := entry.bytes.release(n); err != nil {
					b.creditFault(b.logger, err)
				}
			}
		}
		if lost {
			// An offset no fetch can read: it holds no bytes, only its
			// credits, which the partition actor gives back once its
			// dead letter is acknowledged.
			span.admitted(msg.Offset, last)
			last = msg.Offset
			unreadable.AdmitUnreadable(msg.Offset, b.cfg.Unreadable.Limit)
			continue
		}
		span.admitted(msg.Offset, last)
		last = msg.Offset
		worker.Admit(rec)
	}
}

// markPaused notes that the claim waits for a resume (or no longer does).
func (e *claimEntry) markPaused(on bool) {
	switch {
	case on && e.pausedSince.Load() == 0:
		e.pausedSince.Store(time.Now().UnixNano())
	case !on:
		e.pausedSince.Store(0)
	}
}

// waitLease waits, with a record in hand, while the claim's session lease
// is lapsed (session_lease.go); true at once without a lease or when it
// holds, false when ctx ends, the worker stops or the claim ends first.
func (b *Bridge) waitLease(ctx context.Context, entry *claimEntry, stopped, ended <-chan struct{}) bool {
	l := entry.lease
	if l == nil || !l.lapsedNow() {
		return true
	}
	// Not admitted: Kafka delivers it again, to this member once
	// confirmed, or else to the partition's next owner.
	entry.unconfirmedSince.Store(time.Now().UnixNano())
	defer entry.unconfirmedSince.Store(0)
	return l.wait(ctx, stopped, ended)
}

// restartPastUnreadable is why a claim ends to restart past offsets its
// consumer could not read.
const restartPastUnreadable = "restarting past unreadable offsets"

// endReason names why a wait of the feed loop gave up: the session ended,
// the worker stopped, or else sarama closed the claim.
func endReason(ctx context.Context, stopped <-chan struct{}) string {
	switch {
	case ctx.Err() != nil:
		return "session ended"
	case isClosed(stopped):
		return "partition worker stopped"
	}
	return "revoked"
}

// watchClaimEnd returns a channel that closes when sarama closes the claim.
// sarama's claim embeds its PartitionConsumer, whose Errors() channel closes
// together with Messages(); unlike Messages(), it closes without the bridge
// reading the records still buffered in front of the close, which it cannot
// admit while it waits for a credit. sarama reads the same channel to pass
// the errors on to the group's Errors(), so this sees only some of them; it
// logs and records those, and RunMember hands the bridge the rest
// (FetchError). A claim without Errors() (a test double) yields nil; the
// bridge then watches the read-ahead's ended instead, which closes when the
// read-ahead finds Messages() closed (not while it waits for room: it reads
// nothing then).
func watchClaimEnd(claim sarama.ConsumerGroupClaim, entry *claimEntry, log *slog.Logger) <-chan struct{} {
	src, ok := claim.(interface {
		Errors() <-chan *sarama.ConsumerError
	})
	if !ok {
		return nil
	}
	errs := src.Errors()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for err := range errs {
			entry.lastFetchError.Store(time.Now().UnixNano())
			log.Warn("partition consumer error", "error", err)
			if overLimit(err) {
				entry.unreadable.unreadableBatch()
			}
		}
	}()
	return ended
}

// ReleaseRecord asks the claim of topic/partition in this process to give
// up on the record at offset: one that has failed (held for want of
// evidence, or retried through an outage) is dead-lettered, with the reason
// "released". It is an operator's action; nothing in the pipeline calls it.
// found is false when no claim of the partition runs here.
func (b *Bridge) ReleaseRecord(topic string, partition int32, offset int64) (res *ReleaseResult, found bool, err error) {
	var entry *claimEntry
	b.claims.Range(func(_, v any) bool {
		if e := v.(*claimEntry); e.topic == topic && e.partition == partition && e.release != nil {
			entry = e
			return false
		}
		return true
	})
	if entry == nil {
		return nil, false, nil
	}
	res, err = entry.release(offset)
	return res, true, err
}

// FetchError records a consumer error of a claimed partition (RunMember
// passes on those of the group's Errors()): a claim whose fetch has trouble
// is not idle in the sense of Settled. One that failed on a batch over the
// decompression limit (sarama.MaxDecompressedBatchSize) sets about getting
// past it (BridgeConfig.Unreadable).
func (b *Bridge) FetchError(topic string, partition int32, err error) {
	now := time.Now().UnixNano()
	b.claims.Range(func(_, v any) bool {
		if e := v.(*claimEntry); e.topic == topic && e.partition == partition {
			e.lastFetchError.Store(now)
			if overLimit(err) {
				e.unreadable.unreadableBatch()
			}
		}
		return true
	})
}

// CreditState is the process's credit book at one moment.
type CreditState struct {
	Limit int // the process pool's limit now: G, or the adaptive limit
	Held  int // process credits held now (above Limit for a while after the adaptive limit fell)
	// HeldByClaims is the sum of what the running claims hold; equal to Held
	// whenever no claim is between taking its two credits.
	HeldByClaims int
	// Bytes is what the records in flight are charged against the byte
	// budget (Settings.InFlightBytes), BytesLimit the budget (0: none), and
	// BytesLent what of Bytes records waiting for evidence lend (the budget
	// admits that much more, at most BytesLimit more).
	Bytes, BytesLimit, BytesLent int64
}

// Credits returns the process's credit book.
func (b *Bridge) Credits() CreditState {
	s := CreditState{Limit: b.total.limit(), Held: b.total.inUse()}
	if b.bytes != nil {
		s.Bytes, s.BytesLent = b.bytes.state()
		s.BytesLimit = b.bytes.size
	}
	b.claims.Range(func(_, v any) bool {
		s.HeldByClaims += v.(*claimEntry).credits.heldNow()
		return true
	})
	return s
}

// recordOf converts a sarama message without copying key or value.
func recordOf(m *sarama.ConsumerMessage) *messages.Record {
	r := &messages.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value}
	if !m.Timestamp.IsZero() {
		r.Timestamp = timestamppb.New(m.Timestamp)
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]*messages.Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = &messages.Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}
