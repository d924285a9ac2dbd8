package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A log truncated and written again past its old end (an unclean leader
// election; a topic deleted and made anew) holds other records at the
// offsets the commit metadata calls finished. The next owner must run them:
// skipping them loses them. Here the first owner finishes 1-299 of topic
// "events" with 0 pinned and commits offset 0 with metadata; that very
// commit is then made for "events-rewritten", whose offsets 0-299 hold
// other records, as if the log had been rewritten under the group's commit.
// The check refuses the metadata (the record at 299 is not the one it
// names), and the second owner runs all 300.
func TestResumeRefusesALogWrittenAgain(t *testing.T) {
	_, k := newKfake(t, "events", "rewrite", 1)
	const n = 300
	admin, err := sarama.NewClusterAdmin(k.Brokers, saramaConfig(k.Version))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("events-rewritten", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	produce := func(topic, value string) {
		producer, err := sarama.NewSyncProducer(k.Brokers, saramaConfig(k.Version))
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		var batch []*sarama.ProducerMessage
		for i := range n {
			batch = append(batch, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%d", i)), Value: sarama.StringEncoder(value)})
		}
		if err := producer.SendMessages(batch); err != nil {
			t.Fatal(err)
		}
	}
	produce("events", "v1")
	produce("events-rewritten", "v2")

	s := testSettings(ordering.ByKey)
	s.DrainTimeout = 500 * time.Millisecond
	newBridge := func(h actors.Handler, reader actors.CommittedReader) *actors.Bridge {
		b, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h, Committed: reader,
			Logger:      slog.New(slog.NewTextHandler(&tWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	reader := committedReader(t, k)
	first := &callLog{calls: map[int64]int{}, pin: true}
	b1 := newBridge(first, reader)
	stop := runMember(t, k, s, b1, nil)
	waitFor2(t, "every record but the pinned one handled", 30*time.Second, func() bool {
		offsets, _ := first.count()
		return offsets == n
	})
	stop()
	c, err := reader(context.Background(), k.Topic, 0)
	if err != nil || c.Offset != 0 || c.Metadata == "" {
		t.Fatalf("the first owner committed %+v, %v; want offset 0 with metadata", c, err)
	}

	// The same commit, for the log holding other records.
	k2 := k
	k2.Topic = "events-rewritten"
	client, err := sarama.NewClient(k.Brokers, saramaConfig(k.Version))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(k.Group, client)
	if err != nil {
		t.Fatal(err)
	}
	pom, err := om.ManagePartition(k2.Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	pom.MarkOffset(0, c.Metadata)
	om.Commit()
	_ = pom.Close()
	_ = om.Close()
	reader2 := committedReader(t, k2)
	if c2, err := reader2(context.Background(), k2.Topic, 0); err != nil || c2.Offset != 0 || c2.Metadata != c.Metadata {
		t.Fatalf("the commit copied to %s reads %+v, %v", k2.Topic, c2, err)
	}

	second := &callLog{calls: map[int64]int{}}
	b2 := newBridge(second, reader2)
	stop = runMember(t, k2, s, b2, nil)
	waitFor2(t, "the rewritten partition committed to its end", 30*time.Second, func() bool {
		c, err := reader2(context.Background(), k2.Topic, 0)
		return err == nil && c.Offset == n
	})
	stop()
	checkCredits(t, b2)
	if offsets, _ := second.count(); offsets != n {
		t.Fatalf("the second owner ran %d of the %d records the rewritten log holds (resumed %d): the rest were skipped as finished, and lost",
			offsets, n, b2.Stats().Snapshot().Resumed)
	}
}
