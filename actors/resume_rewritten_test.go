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
	const n = 300
	message := func(value string) func(i int) *sarama.ProducerMessage {
		return func(i int) *sarama.ProducerMessage {
			return &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprintf("host-%d", i)), Value: sarama.StringEncoder(value)}
		}
	}
	ran, resumed := resumeOnALogWrittenAgain(t, n, message("v1"), message("v2"))
	if ran != n {
		t.Fatalf("the second owner ran %d of the %d records the rewritten log holds (resumed %d): the rest were skipped as finished, and lost", ran, n, resumed)
	}
}

// A log written again with the very record at the metadata's last offset
// (same key, value, millisecond timestamp and headers: a producer that
// retried its last record across the leader change writes exactly that)
// passes a check of that record alone. The metadata also names the first
// record a resume would skip; a log that differs there, or in the last
// record's headers alone, is replayed. A log written again identically is
// resumed from: the records carry headers and timestamps of their own, so
// this also shows the records fetched to check are fingerprinted as the
// records delivered were (headers included). Before the metadata named a
// second record and the fingerprint covered headers, the first two cases
// resumed and skipped 49 of 50 records.
func TestResumeRefusesALogWrittenAgainAroundItsTail(t *testing.T) {
	const n = 50
	at := time.UnixMilli(1_700_000_000_000)
	message := func(i int) *sarama.ProducerMessage {
		return &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprintf("host-%d", i)), Value: sarama.StringEncoder("v1"),
			Timestamp: at.Add(time.Duration(i) * time.Millisecond),
			Headers:   []sarama.RecordHeader{{Key: []byte("trace"), Value: []byte(fmt.Sprintf("t-%d", i))}, {Key: []byte("attempt"), Value: []byte("1")}}}
	}
	for _, tc := range []struct {
		name    string
		rewrite func(i int, m *sarama.ProducerMessage)
		ran     int // records the second owner runs
	}{
		{"the same records", func(int, *sarama.ProducerMessage) {}, 1},
		{"another first record skipped, the same last one", func(i int, m *sarama.ProducerMessage) {
			if i == 1 {
				m.Value = sarama.StringEncoder("v2")
			}
		}, n},
		{"the last record's headers other", func(i int, m *sarama.ProducerMessage) {
			if i == n-1 {
				m.Headers[1].Value = []byte("2")
			}
		}, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran, resumed := resumeOnALogWrittenAgain(t, n, message, func(i int) *sarama.ProducerMessage {
				m := message(i)
				tc.rewrite(i, m)
				return m
			})
			if ran != tc.ran || resumed != int64(n-tc.ran) {
				t.Fatalf("the second owner ran %d records and resumed %d; want %d run, %d resumed", ran, resumed, tc.ran, n-tc.ran)
			}
		})
	}
}

// resumeOnALogWrittenAgain has a first owner run "events", whose n records
// message(0..n-1) makes, with 0 pinned, so that it commits offset 0 with
// metadata calling 1..n-1 finished; makes that very commit for
// "events-rewritten", whose records rewritten(0..n-1) makes, as if the log
// had been rewritten under the group's commit; and runs a second owner on
// it to its end. It returns how many offsets the second owner ran, and how
// many it resumed (finished without running, as the metadata said).
func resumeOnALogWrittenAgain(t *testing.T, n int, message, rewritten func(i int) *sarama.ProducerMessage) (ran int, resumed int64) {
	t.Helper()
	_, k := newKfake(t, "events", "rewrite", 1)
	admin, err := sarama.NewClusterAdmin(k.Brokers, saramaConfig(k.Version))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("events-rewritten", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	produce := func(topic string, message func(i int) *sarama.ProducerMessage) {
		producer, err := sarama.NewSyncProducer(k.Brokers, saramaConfig(k.Version))
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		var batch []*sarama.ProducerMessage
		for i := range n {
			m := message(i)
			m.Topic = topic
			batch = append(batch, m)
		}
		if err := producer.SendMessages(batch); err != nil {
			t.Fatal(err)
		}
	}
	produce("events", message)
	produce("events-rewritten", rewritten)

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

	// The same commit, for the log written again.
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
		return err == nil && c.Offset == int64(n)
	})
	stop()
	checkCredits(t, b2)
	ran, _ = second.count()
	return ran, b2.Stats().Snapshot().Resumed
}
