package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
)

func state(partition int32, committed, hwm int64, inFlight int) actors.PartitionState {
	return actors.PartitionState{Topic: "t", Partition: partition, Generation: 1, Committed: committed, Start: 0, HighWatermark: hwm, InFlight: inFlight}
}

// A partition with records waiting, nothing in flight and no progress is
// stalled once the limit has passed, and only then; progress, work in
// flight or reaching the end starts the clock over.
func TestStallWatch(t *testing.T) {
	var w StallWatch
	t0 := time.Unix(1000, 0)
	limit := time.Minute
	idle := []actors.PartitionState{state(0, 10, 50, 0), state(1, 5, 5, 0)}

	if stalled, _ := w.Stalled(idle, t0, limit); stalled {
		t.Fatal("stalled at first sight")
	}
	if stalled, _ := w.Stalled(idle, t0.Add(59*time.Second), limit); stalled {
		t.Fatal("stalled before the limit")
	}
	stalled, why := w.Stalled(idle, t0.Add(61*time.Second), limit)
	if !stalled || !strings.Contains(why, "t/0: 40 records waiting") {
		t.Fatalf("not stalled past the limit: %v %q", stalled, why)
	}

	// Progress starts over.
	moved := []actors.PartitionState{state(0, 11, 50, 0), state(1, 5, 5, 0)}
	if stalled, _ := w.Stalled(moved, t0.Add(62*time.Second), limit); stalled {
		t.Fatal("stalled right after progress")
	}
	if stalled, _ := w.Stalled(moved, t0.Add(121*time.Second), limit); stalled {
		t.Fatal("stalled only 59 s after progress")
	}
	// Work in flight is the pin rule's business, not a stall.
	busy := []actors.PartitionState{state(0, 11, 50, 3)}
	if stalled, _ := w.Stalled(busy, t0.Add(500*time.Second), limit); stalled {
		t.Fatal("a partition with work in flight counted as stalled")
	}
	// A partition at its end, claimed there (no mark yet), has no lag.
	atEnd := []actors.PartitionState{{Topic: "t", Partition: 2, Generation: 1, Committed: -1, Start: 70, HighWatermark: 70}}
	w.Stalled(atEnd, t0, limit)
	if stalled, why := w.Stalled(atEnd, t0.Add(time.Hour), limit); stalled {
		t.Fatalf("an idle partition at its end counted as stalled: %q", why)
	}
	// Partitions no longer claimed are forgotten.
	if len(w.since) != 1 {
		t.Fatalf("remembers %d partitions, want 1", len(w.since))
	}
}

// Lag counts from where the claim began until the first mark.
func TestLagBeforeTheFirstMark(t *testing.T) {
	for _, c := range []struct {
		s    actors.PartitionState
		want int64
	}{
		{actors.PartitionState{Committed: -1, Start: 100, HighWatermark: 100}, 0},
		{actors.PartitionState{Committed: -1, Start: 60, HighWatermark: 100}, 40},
		{actors.PartitionState{Committed: -1, Start: -2, HighWatermark: 50}, 50}, // no committed offset: from the oldest
		{actors.PartitionState{Committed: 30, Start: 10, HighWatermark: 50}, 20},
		{actors.PartitionState{Committed: -1, Start: 0, HighWatermark: 0}, 0},
	} {
		if got := c.s.Lag(); got != c.want {
			t.Errorf("%+v: lag %d, want %d", c.s, got, c.want)
		}
	}
}
