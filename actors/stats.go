package actors

import "sync/atomic"

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
}

// StatsSnapshot is a copy of Stats at one moment.
type StatsSnapshot struct {
	Admitted     int64 // records handed to a partition actor
	Succeeded    int64 // records whose handler succeeded
	Retried      int64 // failed attempts that were retried
	DeadLettered int64 // records written to the dead-letter topic
	Abandoned    int64 // records left unfinished at a drain; Kafka redelivers them
	Fenced       int64 // completions dropped because they came from an older claim
	Panics       int64 // handler panics caught by supervision
	InFlight     int64 // records admitted and not yet finished or abandoned
}

// Snapshot returns the current counts.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Admitted:     s.admitted.Load(),
		Succeeded:    s.succeeded.Load(),
		Retried:      s.retried.Load(),
		DeadLettered: s.deadLettered.Load(),
		Abandoned:    s.abandoned.Load(),
		Fenced:       s.fenced.Load(),
		Panics:       s.panics.Load(),
		InFlight:     s.inFlight.Load(),
	}
}
