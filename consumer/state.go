package consumer

import (
	"fmt"
	"strings"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/telemetry"
)

// Partition is one partition the consumer holds now.
type Partition struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset (the next record to read);
	// -1 before there is one.
	Committed int64
	// HighWatermark is the partition's end as last fetched; Lag the records
	// between Committed and it that are still to finish (0 once the broker
	// confirmed the rest are transaction markers).
	HighWatermark, Lag int64
	// InFlight records are admitted and not finished; Buffered are fetched
	// and not yet admitted.
	InFlight, Buffered int
	// PinnedOffset is the oldest unfinished record, the one holding
	// Committed back, and PinnedSince when it was admitted; zero values when
	// nothing is in flight.
	PinnedOffset int64
	PinnedSince  time.Time
	// SpanBlocked is set while the partition admits nothing more because
	// its pinned record is Config.SpanPerPartition offsets behind.
	SpanBlocked bool
	// Unconfirmed is set while the partition admits nothing because the
	// group's coordinator has not confirmed this member for a session
	// timeout.
	Unconfirmed bool
	// Paused is set while the partition admits nothing because its topic
	// is paused (Consumer.Pause).
	Paused bool
	// DeadLetterFailing is set while a dead-letter write of this partition
	// keeps failing (its record stays unfinished until one succeeds).
	DeadLetterFailing bool
	// Held counts the partition's records whose latest failure nothing
	// could judge (no other record called the dependency, no health check of
	// it ran, just after it): retried, never dead-lettered on a guess, until
	// evidence comes or Release gives them up.
	Held int
}

// Stats counts what the consumer did since Run began.
type Stats struct {
	Succeeded    int64 // handled successfully
	Skipped      int64 // skipped on purpose by the handler (committed, never dead-lettered)
	Resumed      int64 // finished by an earlier owner, as its commit said: not run again
	DeadLettered int64 // written to the dead-letter topic (acknowledged)
	Retried      int64 // failed attempts that were retried
	Abandoned    int64 // unfinished at a drain: Kafka delivers them again
	InFlight     int64 // admitted and not finished now
	// SkippedByReason and DeadLetteredByReason split Skipped and
	// DeadLettered by reason; nil before the first.
	SkippedByReason, DeadLetteredByReason map[string]int64
	// Limit is the process-wide in-flight limit now (Config.Concurrency).
	Limit int
	// ByTopic splits the records' counts by topic: every topic of the
	// Config from the start.
	ByTopic map[string]TopicStats
}

// TopicStats counts what the consumer did with one topic's records.
type TopicStats struct {
	Succeeded, Skipped, Resumed, DeadLettered, Abandoned int64
	// Retried counts the topic's failed attempts that were retried.
	Retried int64
}

// Partitions returns the partitions held now, by topic and partition; none
// before Run has joined the group or after it returned.
func (c *Consumer) Partitions() []Partition {
	b := c.bridge.Load()
	if b == nil {
		return nil
	}
	var out []Partition
	for _, p := range b.Partitions() {
		q := Partition{Topic: p.Topic, Partition: p.Partition, Committed: p.Committed, HighWatermark: p.HighWatermark,
			Lag: p.Lag(), InFlight: p.InFlight, Buffered: p.Buffered, SpanBlocked: !p.SpanBlocked.IsZero(), Unconfirmed: !p.Unconfirmed.IsZero(), Paused: !p.Paused.IsZero(),
			DeadLetterFailing: p.DeadLetterBlocked != nil, Held: p.Held}
		if p.InFlight > 0 {
			q.PinnedOffset, q.PinnedSince = p.PinnedOffset, p.PinnedSince
		}
		out = append(out, q)
	}
	return out
}

// Stats returns the counters now; zero before Run.
func (c *Consumer) Stats() Stats {
	b := c.bridge.Load()
	if b == nil {
		return Stats{}
	}
	s := b.Stats().Snapshot()
	out := Stats{Succeeded: s.Succeeded, Skipped: s.Skipped, Resumed: s.Resumed, DeadLettered: s.DeadLettered,
		Retried: s.Retried, Abandoned: s.Abandoned, InFlight: s.InFlight, SkippedByReason: s.SkippedByReason,
		DeadLetteredByReason: s.DeadLetteredByReason, Limit: b.Concurrency().Limit}
	for topic, t := range s.ByTopic {
		if out.ByTopic == nil {
			out.ByTopic = map[string]TopicStats{}
		}
		out.ByTopic[topic] = TopicStats{Succeeded: t.Succeeded, Skipped: t.Skipped, Resumed: t.Resumed, DeadLettered: t.DeadLettered,
			Abandoned: t.Abandoned, Retried: t.Retried}
	}
	return out
}

// Ready reports whether the consumer is in its group with no partition
// pinned or stalled past Config.ReadyPinLimit, no dead-letter write failing
// and every health check passing; when not, why. It is what /readyz says.
func (c *Consumer) Ready() (bool, string) {
	r := c.ready.Load()
	if r == nil {
		return false, "not started"
	}
	return r.Check(time.Now())
}

// rows are the status page's settings when the module gives none: the
// consumer's configuration, the password masked.
func (r resolved) rows() []telemetry.Setting {
	k, p := r.kafka, r.pipeline
	kv := []any{"brokers", k.Brokers, "topics", strings.Join(k.SourceTopics(), ", "), "group", k.Group, "dead-letter topic", deadLetterTopics(k),
		"kafka version", k.Version, "assignor", k.Assignor, "isolation", k.Isolation, "security", k.Security,
		"members", r.members, "in flight per partition", p.InFlightPerPartition, "in flight total", p.InFlightTotal, "in flight bytes", p.InFlightBytes,
		"concurrency", p.Concurrency, "ordering", p.Ordering, "drain timeout", p.DrainTimeout,
		"max attempts", p.MaxAttempts, "attempt timeout", p.AttemptTimeout}
	out := make([]telemetry.Setting, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, telemetry.Setting{Name: kv[i].(string), Value: fmt.Sprint(kv[i+1])})
	}
	return out
}

// deadLetterTopics names each topic's dead-letter topic, in the topics'
// order.
func deadLetterTopics(k actors.KafkaSettings) string {
	var out []string
	for _, t := range k.SourceTopics() {
		out = append(out, k.DeadLetterTopicOf(t))
	}
	return strings.Join(out, ", ")
}
