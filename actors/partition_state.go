package actors

import (
	"sync/atomic"
	"time"
)

// PartitionState is a snapshot of one claimed partition, for metrics, the
// readiness check and the status page. Reading it never touches the actor's
// mailbox: the actor publishes it through atomics as it works.
type PartitionState struct {
	Topic      string
	Partition  int32
	Generation int32
	// Committed is the last offset marked (the next to consume); -1 before the first mark.
	Committed int64
	// Admitted is the highest offset admitted; -1 before the first.
	Admitted int64
	// Start is the offset the claim began at (the group's committed offset
	// then); negative when the group had none and consumption began at the
	// oldest or newest offset.
	Start int64
	// HighWatermark is the partition's end offset as the consumer last saw it.
	HighWatermark int64
	InFlight      int
	// PinnedOffset and PinnedKey name the oldest unfinished record, the one
	// holding the watermark back; PinnedSince is when it was admitted. Zero
	// values when nothing is in flight.
	PinnedOffset int64
	PinnedKey    string
	PinnedSince  time.Time
}

// Position is the next offset this claim will commit: the last mark, or
// where the claim began before its first mark.
func (s PartitionState) Position() int64 {
	if s.Committed >= 0 {
		return s.Committed
	}
	return max(s.Start, 0)
}

// Lag is the number of records behind the end of the partition. Before the
// claim's first mark it counts from where the claim began, so a partition
// claimed at its end shows no lag.
func (s PartitionState) Lag() int64 {
	if s.HighWatermark <= 0 {
		return 0
	}
	return max(s.HighWatermark-s.Position(), 0)
}

// PinnedFor is how long the oldest unfinished record has held the watermark.
func (s PartitionState) PinnedFor(now time.Time) time.Duration {
	if s.InFlight == 0 || s.PinnedSince.IsZero() {
		return 0
	}
	return now.Sub(s.PinnedSince)
}

// partitionGauges is what the actor publishes; the bridge reads it.
type partitionGauges struct {
	committed, admitted, inFlight atomic.Int64
	pinnedOffset, pinnedSince     atomic.Int64
	pinnedKey                     atomic.Pointer[[]byte] // the pinning record's Key field; records are immutable
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
	if s.InFlight > 0 {
		s.PinnedOffset = g.pinnedOffset.Load()
		if k := g.pinnedKey.Load(); k != nil {
			s.PinnedKey = string(*k)
		}
		if ns := g.pinnedSince.Load(); ns > 0 {
			s.PinnedSince = time.Unix(0, ns)
		}
	}
}
