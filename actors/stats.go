package actors

import (
	"sync"
	"sync/atomic"
)

// Stats counts what the pipeline did, process-wide. Counters only grow;
// InFlight is a gauge. Safe for concurrent use; read with Snapshot. What
// happened to records (outcomes, reasons, failures) is counted per topic
// (topicStats) and summed for the totals, so the totals of a snapshot are
// the sums of its ByTopic; the rest is counted here.
type Stats struct {
	admitted        atomic.Int64
	evidenceLent    atomic.Int64
	inFlight        atomic.Int64
	refusedFinishes atomic.Int64
	creditErrors    atomic.Int64
	topics          sync.Map // topic -> *topicStats
}

// count adds one to reason's counter in m.
func count(m *sync.Map, reason string) {
	v, ok := m.Load(reason)
	if !ok {
		v, _ = m.LoadOrStore(reason, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// StatsSnapshot is a copy of Stats at one moment.
type StatsSnapshot struct {
	Admitted  int64 `json:"admitted"`  // records handed to a partition actor
	Succeeded int64 `json:"succeeded"` // records whose handler succeeded
	Skipped   int64 `json:"skipped"`   // records the handler deliberately ignored (finished and committed, never dead-lettered)
	// Resumed counts records finished without running: an earlier owner of
	// the partition had finished them, as its commit metadata said.
	Resumed int64 `json:"resumed"`
	// SkippedByReason splits Skipped by the handler's reason; nil when none.
	// Its keys are reasons, not names.
	SkippedByReason map[string]int64 `json:"skipped_by_reason,omitempty"`
	Retried         int64            `json:"retried"` // failed attempts that were not final (not permanent)
	// RetriedOwn counts failures judged the record's own (they count towards
	// its dead letter); RetriedShared those shared with other records (an
	// outage, load shedding, a wait for a pool connection); RetriedHeld those
	// nothing could judge (no evidence: the record is held). A failure whose
	// record finished before its verdict was due is never judged, so their
	// sum is at most Retried.
	RetriedOwn    int64 `json:"retried_own"`
	RetriedShared int64 `json:"retried_shared"`
	RetriedHeld   int64 `json:"retried_held"`
	// EvidenceLent counts offsets admitted past a span as evidence for a
	// record pinning its partition; Released the records an operator
	// released to the dead-letter topic.
	EvidenceLent int64 `json:"evidence_lent"`
	Released     int64 `json:"released"`
	DeadLettered int64 `json:"dead_lettered"` // records written to the dead-letter topic (acknowledged)
	// DeadLetteredByReason splits DeadLettered by the envelope's reason (one
	// of messages.DeadLetterReasons); nil when none. Its keys are reasons.
	DeadLetteredByReason    map[string]int64 `json:"dead_lettered_by_reason"`
	DeadLetterWriteFailures int64            `json:"dead_letter_write_failures"` // dead-letter writes that failed and were retried
	Abandoned               int64            `json:"abandoned"`                  // records left unfinished at a drain; Kafka redelivers them
	Fenced                  int64            `json:"fenced"`                     // completions dropped because their claim had drained, or its actor was stopping
	Panics                  int64            `json:"panics"`                     // panics of evaluation actors caught by supervision
	InFlight                int64            `json:"in_flight"`                  // records admitted and not yet finished or abandoned
	// RefusedFinishes and CreditErrors count accounting faults (a finish the
	// ledger refused, a credit given back twice): always zero unless there is
	// a bug, each logged at error level.
	RefusedFinishes int64 `json:"refused_finishes"`
	CreditErrors    int64 `json:"credit_errors"`
	// ByTopic splits the counts of records' outcomes and failures by the
	// records' topic (each topic the consumer was given from the start,
	// others once a record of theirs counts); nil when none.
	ByTopic map[string]TopicStatsSnapshot `json:"by_topic,omitempty"`
}

// Snapshot returns the current counts. Each counter is read once: the
// totals are the sums of ByTopic, though the counters are read one after
// another while records go on finishing.
func (s *Stats) Snapshot() StatsSnapshot {
	out := StatsSnapshot{
		Admitted:        s.admitted.Load(),
		EvidenceLent:    s.evidenceLent.Load(),
		InFlight:        s.inFlight.Load(),
		RefusedFinishes: s.refusedFinishes.Load(),
		CreditErrors:    s.creditErrors.Load(),
		ByTopic:         s.byTopic(),
	}
	for _, t := range out.ByTopic {
		out.Succeeded += t.Succeeded
		out.Skipped += t.Skipped
		out.Resumed += t.Resumed
		out.SkippedByReason = addCounts(out.SkippedByReason, t.SkippedByReason)
		out.Retried += t.Retried
		out.RetriedOwn += t.RetriedOwn
		out.RetriedShared += t.RetriedShared
		out.RetriedHeld += t.RetriedHeld
		out.Released += t.Released
		out.DeadLettered += t.DeadLettered
		out.DeadLetteredByReason = addCounts(out.DeadLetteredByReason, t.DeadLetteredByReason)
		out.DeadLetterWriteFailures += t.DeadLetterWriteFailures
		out.Abandoned += t.Abandoned
		out.Fenced += t.Fenced
		out.Panics += t.Panics
	}
	return out
}

// addCounts adds from's counts into to (made when needed); nil when both
// are empty.
func addCounts(to, from map[string]int64) map[string]int64 {
	for k, v := range from {
		if to == nil {
			to = map[string]int64{}
		}
		to[k] += v
	}
	return to
}

// snapshotCounts copies m's counters; nil when m has none.
func snapshotCounts(m *sync.Map) map[string]int64 {
	var out map[string]int64
	m.Range(func(k, v any) bool {
		if out == nil {
			out = map[string]int64{}
		}
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}
