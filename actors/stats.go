package actors

import (
	"sync"
	"sync/atomic"
)

// Stats counts what the pipeline did, process-wide. Counters only grow;
// InFlight is a gauge. Safe for concurrent use; read with Snapshot.
type Stats struct {
	admitted     atomic.Int64
	succeeded    atomic.Int64
	retried      atomic.Int64
	deadLettered atomic.Int64
	abandoned    atomic.Int64
	fenced       atomic.Int64
	panics       atomic.Int64
	inFlight     atomic.Int64
	skipped      atomic.Int64
	skipReasons  sync.Map // reason string -> *atomic.Int64
}

// skip counts one record skipped for reason.
func (s *Stats) skip(reason string) {
	s.skipped.Add(1)
	v, ok := s.skipReasons.Load(reason)
	if !ok {
		v, _ = s.skipReasons.LoadOrStore(reason, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// StatsSnapshot is a copy of Stats at one moment.
type StatsSnapshot struct {
	Admitted  int64 // records handed to a partition actor
	Succeeded int64 // records whose handler succeeded
	Skipped   int64 // records the handler deliberately ignored (finished and committed, never dead-lettered)
	// SkippedByReason splits Skipped by the handler's reason; nil when none.
	SkippedByReason map[string]int64
	Retried         int64 // failed attempts that were retried
	DeadLettered    int64 // records written to the dead-letter topic
	Abandoned       int64 // records left unfinished at a drain; Kafka redelivers them
	Fenced          int64 // completions dropped because they came from an older claim
	Panics          int64 // handler panics caught by supervision
	InFlight        int64 // records admitted and not yet finished or abandoned
}

// Snapshot returns the current counts.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Admitted:        s.admitted.Load(),
		Succeeded:       s.succeeded.Load(),
		Skipped:         s.skipped.Load(),
		Retried:         s.retried.Load(),
		DeadLettered:    s.deadLettered.Load(),
		Abandoned:       s.abandoned.Load(),
		Fenced:          s.fenced.Load(),
		Panics:          s.panics.Load(),
		InFlight:        s.inFlight.Load(),
		SkippedByReason: s.skipCounts(),
	}
}

func (s *Stats) skipCounts() map[string]int64 {
	var out map[string]int64
	s.skipReasons.Range(func(k, v any) bool {
		if out == nil {
			out = map[string]int64{}
		}
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}
