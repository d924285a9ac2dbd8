package actors_test

// Regressions of a review of the committed offset a claim shows before its
// first mark, and what Position and Lag make of it.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// commitOffset commits offset for partition 0 of k's group, as a tool
// resetting offsets would (no member).
func commitOffset(t *testing.T, k actors.KafkaSettings, offset int64) {
	t.Helper()
	// kfake knows the group once a member has committed: one consumes
	// what is there and leaves.
	first, _, stop := startLoggedMember(t, k, testSettings(ordering.Unordered), nil)
	waitFor2(t, "a first commit", 20*time.Second, func() bool { ps := first.Partitions(); return len(ps) == 1 && ps[0].Committed > 0 })
	stop()
	client, err := sarama.NewClient(k.Brokers, saramaConfig(k.Version))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(k.Group, client)
	if err != nil {
		t.Fatal(err)
	}
	pom, err := om.ManagePartition(k.Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	pom.MarkOffset(offset, "")  // forward
	pom.ResetOffset(offset, "") // backward
	om.Commit()
	_ = pom.Close()
	_ = om.Close()
	c, err := committedReader(t, k)(context.Background(), k.Topic, 0)
	if err != nil || c.Offset != offset {
		t.Fatalf("committed %+v (%v), want %d", c, err, offset)
	}
}

// A group committed offset past the partition's end (the log truncated, or
// an offset reset to a wrong value) makes sarama begin at the oldest
// offset. Shown as the partition's committed offset, the stale one put
// Position past the high watermark and Lag at 0 while every record of the
// partition was unfinished; the claim has none until its first mark.
func TestCommitPastTheEndDoesNotHideTheBacklog(t *testing.T) {
	_, k := newKfake(t, "past", "past-group", 1)
	s := testSettings(ordering.Unordered)
	produceEven(t, k, 1, 5) // offsets 0-4, high watermark 5
	commitOffset(t, k, 100)

	release := make(chan struct{})
	hold := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b, logs, stop := startLoggedMember(t, k, s, hold)
	waitFor2(t, "offsets 0-4 in flight", 20*time.Second, func() bool { ps := b.Partitions(); return len(ps) == 1 && ps[0].InFlight == 5 })
	p := b.Partitions()[0]
	t.Logf("state with 5 records unfinished and nothing marked: start %d committed %d hwm %d in flight %d lag %d",
		p.Start, p.Committed, p.HighWatermark, p.InFlight, p.Lag())
	if p.Lag() < 5 {
		t.Errorf("lag %d with all 5 records of the partition unfinished and nothing committed by this claim; want 5", p.Lag())
	}
	close(release)
	waitFor2(t, "offset 5 marked", 20*time.Second, func() bool { ps := b.Partitions(); return len(ps) == 1 && ps[0].Committed == 5 })
	stop()
	if c, err := committedReader(t, k)(context.Background(), k.Topic, 0); err != nil || c.Offset != 5 {
		t.Fatalf("broker's committed offset %+v (%v), want 5", c, err)
	}
	if ended := logs.line("claim ended"); !strings.Contains(ended, " committed=5 ") {
		t.Errorf("claim ended: the claim left 5 committed; the line says otherwise:\n%s", ended)
	}
}
