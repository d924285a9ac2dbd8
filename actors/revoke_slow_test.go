package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A cooperative revoke while the member's partitions consume slowly but
// steadily, each as credits come back. sarama's broker consumer hands each
// partition its part of a fetch response and fetches again only once every
// partition has taken the whole of its part, unless one takes none for
// MaxProcessingTime twice over; and it lets a revoked partition go (closing
// its claim) only between fetches. A partition taking a record every few
// milliseconds never trips that timeout, so with thousands of small records
// in each part the revoke waited for all of them to be admitted: member B
// got no partition for 12 s (the e2e suite's status page found a listener
// without any). The bridge reads ahead of its credits, so the
// parts are taken at once and the revoke happens at the next fetch.
func TestCooperativeRevokeWhileConsumingSlowly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration scenario")
	}
	const partitions, perPartition = 4, 5000 // each partition's records fit one fetch response
	_, k := newKfake(t, "slow", "slow-group", partitions)
	produceEven(t, k, partitions, perPartition)

	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 1
	s.InFlightTotal = partitions
	s.DrainTimeout = time.Second
	slow := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		select { // a downstream answering in 2 ms: about 500 records/s per partition
		case <-time.After(2 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	start := func(name string) (*actors.Bridge, func()) {
		b, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: slow,
			DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		return b, runMember(t, k, s, b, func(c *sarama.Config) { c.ClientID = name })
	}
	a, stopA := start("member-a")
	waitFor2(t, "member A to consume every partition", 30*time.Second, func() bool {
		ps := a.Partitions()
		if len(ps) != partitions {
			return false
		}
		for _, p := range ps {
			if p.Admitted <= 0 {
				return false
			}
		}
		return true
	})
	joined := time.Now()
	b, stopB := start("member-b")
	// A handover takes a join, a sync, the revoked claims' drain (at most
	// DrainTimeout) and a second join; the records left would take 10 s.
	waitFor2(t, "member B to be given its partitions", s.DrainTimeout+5*time.Second, func() bool {
		return len(b.Partitions()) == partitions/2
	})
	t.Logf("B was given its partitions %v after joining", time.Since(joined).Round(time.Millisecond))
	stopB()
	stopA()
	checkCredits(t, a)
	checkCredits(t, b)
}
