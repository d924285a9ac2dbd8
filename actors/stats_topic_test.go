package actors

import (
	"testing"

	"pgregory.net/rapid"
)

// Whatever is counted, on whichever topics, each topic's counts sum to the
// process's totals, and a topic counts only what was counted for it.
func TestStatsByTopicSumToTheTotals(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &Stats{}
		topics := []string{"a", "b", "c"}
		s.KnowTopics(topics[0])
		type tally struct{ ok, skipped, dead, resumed, abandoned, fenced, retried, own, shared, held, panics, released, dlqFail int64 }
		want := map[string]*tally{"a": {}}
		steps := rapid.IntRange(0, 200).Draw(t, "steps")
		for range steps {
			topic := rapid.SampledFrom(topics).Draw(t, "topic")
			c := s.forTopic(topic)
			w := want[topic]
			if w == nil {
				w = &tally{}
				want[topic] = w
			}
			switch rapid.IntRange(0, 12).Draw(t, "what") {
			case 12:
				c.retried()
				w.retried++
			case 0:
				c.succeed()
				w.ok++
			case 1:
				c.skip(rapid.SampledFrom([]string{"x", "y"}).Draw(t, "reason"))
				w.skipped++
			case 2:
				c.deadLetter(rapid.SampledFrom([]string{"permanent", "transient"}).Draw(t, "reason"))
				w.dead++
			case 3:
				c.resume()
				w.resumed++
			case 4:
				n := rapid.Int64Range(1, 5).Draw(t, "n")
				c.abandon(n)
				w.abandoned += n
			case 5:
				c.fence()
				w.fenced++
			case 6:
				c.retriedOwn()
				w.own++
			case 7:
				c.retriedShared()
				w.shared++
			case 8:
				c.retriedHeld()
				w.held++
			case 9:
				c.panicked()
				w.panics++
			case 10:
				c.release()
				w.released++
			case 11:
				c.deadLetterWriteFailed()
				w.dlqFail++
			}
		}
		snap := s.Snapshot()
		if len(snap.ByTopic) != len(want) {
			t.Fatalf("topics %v, want %d (the known one and those counted)", snap.ByTopic, len(want))
		}
		var sum TopicStatsSnapshot
		reasons := map[string]int64{}
		for topic, w := range want {
			g := snap.ByTopic[topic]
			got := tally{g.Succeeded, g.Skipped, g.DeadLettered, g.Resumed, g.Abandoned, g.Fenced, 0, g.RetriedOwn, g.RetriedShared, g.RetriedHeld,
				g.Panics, g.Released, g.DeadLetterWriteFailures}
			// Retried is at least the verdicts: a verdict may come without
			// its retry counted here.
			if wantRetried := max(w.retried, w.own+w.shared+w.held); g.Retried != wantRetried {
				t.Fatalf("topic %s retried %d, want %d", topic, g.Retried, wantRetried)
			}
			cmp := *w
			cmp.retried = 0
			if got != cmp {
				t.Fatalf("topic %s counted %+v, want %+v", topic, got, *w)
			}
			sum.Succeeded += g.Succeeded
			sum.Skipped += g.Skipped
			sum.DeadLettered += g.DeadLettered
			sum.Resumed += g.Resumed
			sum.Abandoned += g.Abandoned
			sum.Fenced += g.Fenced
			sum.RetriedOwn += g.RetriedOwn
			sum.Retried += g.Retried
			sum.Panics += g.Panics
			for r, n := range g.DeadLetteredByReason {
				reasons[r] += n
			}
		}
		if sum.Succeeded != snap.Succeeded || sum.Skipped != snap.Skipped || sum.DeadLettered != snap.DeadLettered ||
			sum.Resumed != snap.Resumed || sum.Abandoned != snap.Abandoned || sum.Fenced != snap.Fenced ||
			sum.RetriedOwn != snap.RetriedOwn || sum.Retried != snap.Retried || sum.Panics != snap.Panics {
			t.Fatalf("the topics sum to %+v; the totals are %+v", sum, snap)
		}
		for r, n := range snap.DeadLetteredByReason {
			if reasons[r] != n {
				t.Fatalf("reason %s: the topics sum to %d, the total is %d", r, reasons[r], n)
			}
		}
	})
}
