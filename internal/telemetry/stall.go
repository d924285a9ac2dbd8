package telemetry

import (
	"fmt"
	"sync"
	"time"

	"github.com/patchflow/patchflow/actors"
)

// StallWatch notices a claimed partition with records waiting, none in
// flight and a position that has not moved: the pipeline admits nothing
// there (starved of process credits, or a fetch that stopped). The pinned
// watermark rule cannot see this, because no record is pinning anything.
// A partition whose topic the application paused is not stalled. It
// remembers, per partition, since when it has looked like that; the
// zero value is ready to use and it is safe for concurrent use.
type StallWatch struct {
	mu    sync.Mutex
	since map[string]stallMark
}

type stallMark struct {
	generation int32
	position   int64
	since      time.Time
}

// Stalled returns the first partition of states that has been idle with lag
// for longer than limit, and a reason naming it. Partitions that made
// progress, have work in flight or are at their end start over; partitions
// no longer claimed are forgotten.
func (w *StallWatch) Stalled(states []actors.PartitionState, now time.Time, limit time.Duration) (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since == nil {
		w.since = map[string]stallMark{}
	}
	seen := make(map[string]bool, len(states))
	stalled, why := false, ""
	for _, p := range states {
		key := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		seen[key] = true
		prev, ok := w.since[key]
		idle := p.InFlight == 0 && p.Lag() > 0 && p.Paused.IsZero() // a pause is the application's choice
		if !idle || !ok || prev.generation != p.Generation || prev.position != p.Position() {
			w.since[key] = stallMark{generation: p.Generation, position: p.Position(), since: now}
			continue
		}
		if d := now.Sub(prev.since); limit > 0 && d > limit && !stalled {
			stalled, why = true, fmt.Sprintf("%s: %d records waiting and none admitted for %v (position %d)", key, p.Lag(), d.Round(time.Second), p.Position())
		}
	}
	for key := range w.since {
		if !seen[key] {
			delete(w.since, key)
		}
	}
	return stalled, why
}
