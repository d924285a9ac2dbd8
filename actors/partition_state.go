package actors

import (
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// PartitionState is a snapshot of one claimed partition, for metrics, the
// readiness check and the status page. Reading it never touches the actor's
// mailbox: the actor publishes it through atomics as it works.
type PartitionState struct {
	Topic      string
	Partition  int32
	Generation int32
	// Committed is the group's committed offset (the next to consume): the
	// last offset marked, or before the first mark the committed offset
	// sarama began the claim at (Start, when not a sentinel). -1 when there
	// is none (nothing marked, and sarama began at the oldest or newest
	// offset): no output shows it as an offset.
	Committed int64
	// Admitted is the highest offset admitted; -1 before the first (no
	// output shows it as an offset).
	Admitted int64
	// Start is sarama's InitialOffset, the offset the claim began at (the
	// group's committed offset then); negative (sarama.OffsetOldest or
	// OffsetNewest) when the group had none in the log's range and
	// consumption began at the oldest or newest offset.
	Start int64
	// HighWatermark is the partition's end offset as the consumer last saw it.
	HighWatermark int64
	InFlight      int
	// InFlightLimit is how many records the partition may hold in flight:
	// S, Settings.InFlightPerPartition.
	InFlightLimit int
	// Buffered is how many fetched records wait in the claim's channel and
	// its read-ahead, not yet admitted.
	Buffered int
	// WaitingForCredit is when the bridge began to wait for a credit with
	// the next record in hand; zero when it is not waiting.
	WaitingForCredit time.Time
	// SpanBlocked is when the bridge began to wait, with the next record in
	// hand, for the watermark to come within SpanLimit offsets of it: the
	// record at PinnedOffset holds the partition. Zero when not blocked.
	SpanBlocked time.Time
	// Unconfirmed is when the bridge began to wait, with the next record in
	// hand, for the group's coordinator to confirm the member (the session
	// lease lapsed: BridgeConfig.Lease). Zero when not waiting.
	Unconfirmed time.Time
	// Paused is when the bridge began to wait, with the next record in
	// hand, for the application to resume the partition's topic
	// (BridgeConfig.Pauses). Zero when not paused.
	Paused time.Time
	// SpanLimit is the most offsets admitted past the watermark.
	SpanLimit int64
	// MetadataBytes is the size of the commit metadata last marked.
	MetadataBytes int
	// LastDelivered is when the claim last delivered a record (or began);
	// LastFetchError when its consumer last reported an error (zero: never).
	LastDelivered, LastFetchError time.Time
	// Settled reports a claim that has consumed all there is: idle for
	// IdleSettle with nothing buffered, in flight or waiting and no fetch
	// error meanwhile, and the broker confirmed (BridgeConfig.SettleProbe)
	// that a fetch at its position delivers nothing and no open transaction
	// holds records back. The offsets left below the high watermark are then
	// not records (transaction markers, aborted records under
	// read_committed), so Lag counts them as none.
	Settled bool
	// PinnedOffset and PinnedKey name the oldest unfinished record, the one
	// holding the watermark back; PinnedSince is when it was admitted. Zero
	// values when nothing is in flight.
	PinnedOffset int64
	PinnedKey    string
	PinnedSince  time.Time
	// PinnedFailure is the last failed attempt of the pinning record; nil
	// when it has not failed.
	PinnedFailure *messages.FailedAttempt
	// DeadLetterBlocked is set while a dead-letter write of this partition
	// keeps failing (the record stays unfinished; see DeadLetterWriter).
	DeadLetterBlocked *DeadLetterBlock
	// Held counts records whose latest failure could not be judged (no
	// evidence): retried, never dead-lettered on a guess (docs/architecture.md,
	// "Whose failure").
	Held int
	// Overdue counts attempts whose handler has not returned past the
	// attempt deadline and its grace (a handler that ignores its context).
	Overdue int
	// Overdrawn is how many offsets past the span were lent as evidence for
	// the record pinning the watermark.
	Overdrawn int64
}

// DeadLetterBlock describes a dead-letter write that keeps failing.
type DeadLetterBlock struct {
	Offset int64     // the record being dead-lettered
	Since  time.Time // its first failed write
	Writes int       // writes tried so far
	Error  string    // the last write's error, which says what to fix
}

// Position is the next offset this claim will commit: the committed offset,
// or where the claim began when the group has none.
func (s PartitionState) Position() int64 {
	if s.Committed >= 0 {
		return s.Committed
	}
	return max(s.Start, 0)
}

// Lag is the number of records behind the end of the partition. Before the
// claim's first mark it counts from the committed offset the claim began
// at, so a partition claimed at its end shows no lag; a settled claim shows
// none either (see Settled), so a partition ending in a transaction marker
// reads as caught up.
func (s PartitionState) Lag() int64 {
	if s.HighWatermark <= 0 || s.Settled {
		return 0
	}
	return max(s.HighWatermark-s.Position(), 0)
}

// idle reports a claim that has delivered nothing for after, with nothing
// buffered, in flight or waiting for a credit, and no recent fetch error.
func (s PartitionState) idle(now time.Time, after time.Duration) bool {
	quiet := func(t time.Time) bool { return t.IsZero() || now.Sub(t) >= after }
	return s.InFlight == 0 && s.Buffered == 0 && s.WaitingForCredit.IsZero() && s.SpanBlocked.IsZero() && s.Unconfirmed.IsZero() && quiet(s.LastDelivered) && quiet(s.LastFetchError)
}

// PinnedFor is how long the oldest unfinished record has held the watermark.
// A record admitted after now (callers take now before they read the
// state) has pinned nothing yet: 0, never a negative age.
func (s PartitionState) PinnedFor(now time.Time) time.Duration {
	if s.InFlight == 0 || s.PinnedSince.IsZero() {
		return 0
	}
	return max(0, now.Sub(s.PinnedSince))
}

// partitionGauges is what the actor publishes; the bridge reads it.
type partitionGauges struct {
	committed, admitted, inFlight atomic.Int64
	metadataBytes                 atomic.Int64 // the last commit metadata's size
	pinnedOffset, pinnedSince     atomic.Int64
	pinnedKey                     atomic.Pointer[[]byte] // the pinning record's Key field; records are immutable
	pinnedFailure                 atomic.Pointer[messages.FailedAttempt]
	deadLetter                    atomic.Pointer[DeadLetterBlock]
	held, overdue                 atomic.Int64
}

func newPartitionGauges() *partitionGauges {
	g := &partitionGauges{}
	g.committed.Store(-1)
	g.admitted.Store(-1)
	return g
}

func (g *partitionGauges) snapshot(s *PartitionState) {
	s.Committed = g.committed.Load()
	s.Admitted = g.admitted.Load()
	s.InFlight = int(g.inFlight.Load())
	s.MetadataBytes = int(g.metadataBytes.Load())
	if s.InFlight > 0 {
		s.PinnedOffset = g.pinnedOffset.Load()
		if k := g.pinnedKey.Load(); k != nil {
			s.PinnedKey = string(*k)
		}
		if ns := g.pinnedSince.Load(); ns > 0 {
			s.PinnedSince = time.Unix(0, ns)
		}
		s.PinnedFailure = g.pinnedFailure.Load()
	}
	s.DeadLetterBlocked = g.deadLetter.Load()
	s.Held = int(g.held.Load())
	s.Overdue = int(g.overdue.Load())
}
