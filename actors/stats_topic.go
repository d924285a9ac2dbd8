package actors

import (
	"sync"
	"sync/atomic"
)

// topicStats counts what happened to one topic's records: their outcomes
// and failures. Stats sums them for its totals.
type topicStats struct {
	succeeded, skipped, resumed, deadLettered, abandoned, fenced atomic.Int64
	retried, retriedOwn, retriedShared, retriedHeld              atomic.Int64
	panics, released, deadLetterWriteFailures                    atomic.Int64
	skipReasons, deadLetterReasons                               sync.Map // reason string -> *atomic.Int64
}

// topic returns name's counters, making them on first use.
func (s *Stats) topic(name string) *topicStats {
	if t, ok := s.topics.Load(name); ok {
		return t.(*topicStats)
	}
	t, _ := s.topics.LoadOrStore(name, new(topicStats))
	return t.(*topicStats)
}

// KnowTopics makes each topic's counters present, at zero, before its
// first record, so a dashboard or an alert sees the topic from the start.
func (s *Stats) KnowTopics(topics ...string) {
	for _, t := range topics {
		s.topic(t)
	}
}

// counts is what a partition actor counts its records with: its topic's
// counters.
type counts struct{ t *topicStats }

func (s *Stats) forTopic(name string) counts { return counts{t: s.topic(name)} }

func (c counts) succeed() {
	c.t.succeeded.Add(1)
}

func (c counts) skip(reason string) {
	c.t.skipped.Add(1)
	count(&c.t.skipReasons, reason)
}

func (c counts) deadLetter(reason string) {
	c.t.deadLettered.Add(1)
	count(&c.t.deadLetterReasons, reason)
}

func (c counts) resume() {
	c.t.resumed.Add(1)
}

func (c counts) abandon(n int64) {
	c.t.abandoned.Add(n)
}

func (c counts) fence() {
	c.t.fenced.Add(1)
}

// retried counts a failed attempt that will be retried; its verdict,
// once judged, is counted by retriedOwn, retriedShared or retriedHeld.
func (c counts) retried() { c.t.retried.Add(1) }

func (c counts) retriedOwn() {
	c.t.retriedOwn.Add(1)
}

func (c counts) retriedShared() {
	c.t.retriedShared.Add(1)
}

func (c counts) retriedHeld() {
	c.t.retriedHeld.Add(1)
}

func (c counts) panicked() {
	c.t.panics.Add(1)
}

func (c counts) release() {
	c.t.released.Add(1)
}

func (c counts) deadLetterWriteFailed() {
	c.t.deadLetterWriteFailures.Add(1)
}

// TopicStatsSnapshot is one topic's share of a StatsSnapshot: the same
// fields, counted for its records only.
type TopicStatsSnapshot struct {
	Succeeded               int64            `json:"succeeded"`
	Skipped                 int64            `json:"skipped"`
	SkippedByReason         map[string]int64 `json:"skipped_by_reason,omitempty"`
	Resumed                 int64            `json:"resumed"`
	DeadLettered            int64            `json:"dead_lettered"`
	DeadLetteredByReason    map[string]int64 `json:"dead_lettered_by_reason,omitempty"`
	DeadLetterWriteFailures int64            `json:"dead_letter_write_failures"`
	Abandoned               int64            `json:"abandoned"`
	Fenced                  int64            `json:"fenced"`
	Retried                 int64            `json:"retried"`
	RetriedOwn              int64            `json:"retried_own"`
	RetriedShared           int64            `json:"retried_shared"`
	RetriedHeld             int64            `json:"retried_held"`
	Panics                  int64            `json:"panics"`
	Released                int64            `json:"released"`
}

func (s *Stats) byTopic() map[string]TopicStatsSnapshot {
	var out map[string]TopicStatsSnapshot
	s.topics.Range(func(k, v any) bool {
		if out == nil {
			out = map[string]TopicStatsSnapshot{}
		}
		t := v.(*topicStats)
		out[k.(string)] = TopicStatsSnapshot{
			Succeeded: t.succeeded.Load(), Skipped: t.skipped.Load(), SkippedByReason: snapshotCounts(&t.skipReasons),
			Resumed: t.resumed.Load(), DeadLettered: t.deadLettered.Load(), DeadLetteredByReason: snapshotCounts(&t.deadLetterReasons),
			DeadLetterWriteFailures: t.deadLetterWriteFailures.Load(), Abandoned: t.abandoned.Load(), Fenced: t.fenced.Load(),
			RetriedOwn: t.retriedOwn.Load(), RetriedShared: t.retriedShared.Load(), RetriedHeld: t.retriedHeld.Load(),
			Retried: max(t.retried.Load(), t.retriedOwn.Load()+t.retriedShared.Load()+t.retriedHeld.Load()),
			Panics:  t.panics.Load(), Released: t.released.Load(),
		}
		return true
	})
	return out
}
