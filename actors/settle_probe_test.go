package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// neverSettles watches the bridge's only partition for d, asking as the
// readiness check does (every 50 ms), and fails if it ever reads as caught
// up while offsets remain below its high watermark, or if none ever do (the
// claim consumed everything: the case was not made).
func neverSettles(t *testing.T, bridge *actors.Bridge, d time.Duration, what string) {
	t.Helper()
	waiting := false
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ps := bridge.Partitions()
		if len(ps) != 1 {
			t.Fatalf("partitions %d", len(ps))
		}
		p := ps[0]
		if p.HighWatermark > p.Position() && p.Lag() == 0 {
			t.Fatalf("%s (high watermark %d, position %d), yet the partition reads settled with lag 0", what, p.HighWatermark, p.Position())
		}
		waiting = waiting || p.HighWatermark > p.Position()
	}
	if !waiting {
		t.Fatalf("%s, yet no offsets were left below the high watermark", what)
	}
}

// Under read_committed an open transaction holds the last stable offset
// back: committed records written after it (here by an ordinary producer)
// cannot be fetched until the transaction ends (up to
// transaction.timeout.ms). The claim then delivers nothing, with nothing
// buffered and no fetch error; it must not read as settled, since records
// wait, and the stall rule must be able to see it.
func TestNotSettledWhileAnOpenTransactionHoldsRecords(t *testing.T) {
	_, k := newKfake(t, "txn-open", "txn-open-group", 1)
	produceEven(t, k, 1, 3) // offsets 0-2: ordinary records, consumed

	// A transactional producer opens a transaction and hangs in it.
	tp := transactionalProducer(t, k, "txn-open-producer")
	if err := tp.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.SendMessage(&sarama.ProducerMessage{Topic: k.Topic, Value: sarama.StringEncoder("open")}); err != nil {
		t.Fatal(err)
	}
	produceEven(t, k, 1, 5) // five ordinary, committed records behind it

	s := testSettings(ordering.Unordered)
	var handled atomic.Int64
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil })
	const settle = 300 * time.Millisecond
	bridge := settlingBridge(t, k, s, h, settle)
	runMember(t, k, s, bridge, nil)
	waitFor2(t, "the records before the transaction consumed", 20*time.Second, func() bool {
		ps := bridge.Partitions()
		return len(ps) == 1 && ps[0].Committed == 3
	})

	neverSettles(t, bridge, settle+2*time.Second, "5 committed records wait behind an open transaction")
}

// "No fetch error meanwhile" is not evidence that a claim has consumed
// everything: sarama redispatches NOT_LEADER_FOR_PARTITION (and
// LEADER_NOT_AVAILABLE, leader-epoch errors, throttled empty fetches)
// silently, without a ConsumerError. A partition whose fetches keep failing
// so, with records waiting, must not read as settled.
func TestNotSettledWhileFetchesFailSilently(t *testing.T) {
	const settle = 500 * time.Millisecond
	bridge, handled := answeredClaim(t, "silent", settle, func(_ int64, p *kmsg.FetchResponseTopicPartition) {
		p.ErrorCode = kerr.NotLeaderForPartition.Code
	}, func(c *sarama.Config) { c.Consumer.Retry.Backoff = 100 * time.Millisecond })
	waitFor2(t, "a first record handled", 20*time.Second, func() bool { return handled.Load() > 0 })
	neverSettles(t, bridge, settle+2*time.Second, "records wait while every fetch fails (NOT_LEADER_FOR_PARTITION)")
}

// answeredClaim runs one member of a one-partition group of its own on
// topic, holding ten batches of one record, through a settling bridge
// (IdleSettle settle) whose handler counts the records it is given, with
// one batch per fetch and the fetches after the first answered by answer
// (answerFetches); configure, when not nil, changes the consumer's config
// further.
func answeredClaim(t *testing.T, topic string, settle time.Duration, answer func(offset int64, p *kmsg.FetchResponseTopicPartition), configure func(*sarama.Config)) (*actors.Bridge, *atomic.Int64) {
	t.Helper()
	cluster, k := newKfake(t, topic, topic+"-group", 1)
	for range 10 { // ten batches of one record
		produceEven(t, k, 1, 1)
	}
	answerFetches(cluster, answer)
	s := testSettings(ordering.Unordered)
	handled := new(atomic.Int64)
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil })
	bridge := settlingBridge(t, k, s, h, settle)
	runMember(t, k, s, bridge, func(c *sarama.Config) {
		c.Consumer.Fetch.Default = 1 // one batch per fetch
		if configure != nil {
			configure(c)
		}
	})
	return bridge, handled
}

// answerFetches lets cluster answer the first fetch (with
// Consumer.Fetch.Default = 1, the batch at offset 0) and answers every later
// one itself: no records, and what answer sets in each partition's answer
// (from the offset fetched). Counting fetches, not records handled, keeps
// sarama from fetching more before the answers change.
func answerFetches(cluster *kfake.Cluster, answer func(offset int64, p *kmsg.FetchResponseTopicPartition)) {
	var fetches atomic.Int64
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if fetches.Add(1) == 1 {
			return nil, nil, false
		}
		r := req.(*kmsg.FetchRequest)
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.RecordBatches = []byte{} // not null, as a broker sends them
				answer(rp.FetchOffset, &sp)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// A new leader can be behind the old one: until it catches up, its high
// watermark is below the one the consumer was told, and a fetch at the
// claim's position answers no records and no error (as does one up to the
// end of its log, which reaches the old high watermark). The claim has
// records waiting (they come once the leader catches up) and must not read
// as settled; the probe read the empty answer as nothing left.
func TestNotSettledWhileANewLeaderLagsBehindTheHighWatermark(t *testing.T) {
	const settle = 500 * time.Millisecond
	bridge, handled := answeredClaim(t, "lagging", settle, func(offset int64, p *kmsg.FetchResponseTopicPartition) {
		// The new leader's high watermark is where the fetch asks.
		p.HighWatermark, p.LastStableOffset = offset, offset
	}, nil)
	waitFor2(t, "a first record handled", 20*time.Second, func() bool { return handled.Load() > 0 })
	neverSettles(t, bridge, settle+2*time.Second, "records wait while the new leader catches up")
}

// An unclean election can truncate the log below the high watermark the
// consumer was told: here to 1, the claim's position, so offsets 1-9 are
// gone. sarama keeps the high watermark (10) of the last fetch that
// returned records, and fetches at the new end answer none with a high
// watermark of 1; the claim has consumed all there is and must read as
// settled (a fetch past the log's end is out of range, which a lagging
// leader's is not). The probe read the leader's high watermark below the
// claim's as a new leader catching up, and left the partition lagging by 9
// until records were written again.
func TestSettlesWhenAnUncleanElectionTruncatedTheLogAtThePosition(t *testing.T) {
	const end = 1
	bridge, handled := answeredClaim(t, "truncated", 300*time.Millisecond, func(offset int64, p *kmsg.FetchResponseTopicPartition) {
		p.HighWatermark, p.LastStableOffset = end, end
		if offset > end {
			p.ErrorCode = kerr.OffsetOutOfRange.Code
		}
	}, nil)
	waitFor2(t, "the truncated partition read as settled with no lag", 10*time.Second, func() bool {
		ps := bridge.Partitions()
		return len(ps) == 1 && ps[0].HighWatermark == 10 && ps[0].Position() == end && ps[0].Settled && ps[0].Lag() == 0
	})
	if n := handled.Load(); n != end {
		t.Fatalf("%d records handled, want the %d left", n, end)
	}
}

// Retention deleted every record of a partition: the claim starts at the
// oldest offset, the log's start, where there is nothing (as it does when
// the group's commit is below the log's start: sarama finds it out of range
// and starts at Consumer.Offsets.Initial, the oldest). The claim has
// consumed all there is and must read as caught up; the probe asked at
// position 0, got OFFSET_OUT_OF_RANGE, and left the partition lagging by the
// deleted records for ever.
func TestSettlesWhenRetentionDeletedTheRecordsBelowTheCommit(t *testing.T) {
	_, k := newKfake(t, "retained", "retained-group", 1)
	produceEven(t, k, 1, 5) // offsets 0-4
	deleteRecords(t, k, 5)  // retention takes them all

	var handled atomic.Int64
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil })
	const settle = 300 * time.Millisecond
	bridge := settlingBridge(t, k, testSettings(ordering.Unordered), h, settle)
	runMember(t, k, testSettings(ordering.Unordered), bridge, nil)
	waitFor2(t, "the emptied partition read as settled with no lag", 10*time.Second, func() bool {
		ps := bridge.Partitions()
		return len(ps) == 1 && ps[0].HighWatermark == 5 && ps[0].Settled && ps[0].Lag() == 0
	})
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d deleted records handled", n)
	}
}

// What a consumer is given from a fetch: not transaction markers, not the
// records of an aborted transaction, but the records of a later committed
// transaction of the same producer.
func TestDeliverableFollowsAbortedTransactions(t *testing.T) {
	batch := func(first int64, n int, producer int64, control bool) *sarama.Records {
		b := &sarama.RecordBatch{FirstOffset: first, ProducerID: producer, IsTransactional: true, Control: control}
		for i := range n {
			b.Records = append(b.Records, &sarama.Record{OffsetDelta: int64(i)})
		}
		return &sarama.Records{RecordBatch: b}
	}
	block := &sarama.FetchResponseBlock{
		RecordsSet: []*sarama.Records{
			batch(0, 3, 7, false), // aborted
			batch(3, 1, 7, true),  // its abort marker
			batch(4, 2, 7, false), // committed
			batch(6, 1, 7, true),  // its commit marker
		},
		AbortedTransactions: []*sarama.AbortedTransaction{{ProducerID: 7, FirstOffset: 0}},
	}
	for position, want := range map[int64]bool{0: true, 3: true, 5: true, 6: false, 7: false} {
		if got := actors.Deliverable(block, position); got != want {
			t.Errorf("deliverable at %d = %v, want %v", position, got, want)
		}
	}
	block.RecordsSet = block.RecordsSet[:2] // only the aborted transaction and its marker
	if actors.Deliverable(block, 0) {
		t.Error("records of an aborted transaction read as deliverable")
	}
}

// deleteRecords has the broker delete partition 0's records below to, as
// retention does.
func deleteRecords(t *testing.T, k actors.KafkaSettings, to int64) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteRecords(k.Topic, map[int32]int64{0: to}); err != nil {
		t.Fatal(err)
	}
}

// The probe at a position below the log's start asks at the start: records
// left there (also inside a batch the deletion cut) are deliverable, so no
// position reads as settled while any remain; once all are deleted every
// position up to the end does, and one past the end does not; the end
// also does for a caller told of a later one (the log was truncated).
func TestProbeBelowTheLogStartSeesTheRecordsLeft(t *testing.T) {
	_, k := newKfake(t, "retained-left", "retained-left-group", 1)
	produceEven(t, k, 1, 5) // offsets 0-4
	produceEven(t, k, 1, 5) // offsets 5-9
	probe := fetchProbe(t, k)
	for _, start := range []int64{3, 5, 9} {
		deleteRecords(t, k, start)
		for _, pos := range []int64{0, 2, start} {
			if ok, err := probe(k.Topic, 0, pos, 10); ok {
				t.Errorf("log start %d, position %d: settled with offsets %d-9 left (err %v)", start, pos, start, err)
			}
		}
	}
	deleteRecords(t, k, 10)
	for _, pos := range []int64{0, 9, 10} {
		if ok, err := probe(k.Topic, 0, pos, 10); !ok {
			t.Errorf("every record deleted, position %d: not settled (err %v)", pos, err)
		}
	}
	if ok, _ := probe(k.Topic, 0, 11, 10); ok {
		t.Error("a position past the end read as settled")
	}
	// A caller told of 11 while the log ends at 10: the log was truncated
	// (a fetch at 11 is out of range), and nothing more comes.
	if ok, err := probe(k.Topic, 0, 10, 11); !ok {
		t.Errorf("a log truncated to 10 not settled for a caller told of 11 (err %v)", err)
	}
}

// Under read_committed, the log's start inside an aborted transaction: the
// records left are aborted ones, which no consumer is given.
func TestProbeBelowTheLogStartInsideAnAbortedTransaction(t *testing.T) {
	_, k := newKfake(t, "retained-aborted", "retained-aborted-group", 1)
	tp := transactionalProducer(t, k, "retained-aborted-producer")
	if err := tp.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	for range 3 { // offsets 0-2, then the abort marker at 3
		if _, _, err := tp.SendMessage(&sarama.ProducerMessage{Topic: k.Topic, Value: sarama.StringEncoder("aborted")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tp.AbortTxn(); err != nil {
		t.Fatal(err)
	}
	deleteRecords(t, k, 2)
	if ok, err := fetchProbe(t, k)(k.Topic, 0, 0, 4); !ok {
		t.Fatalf("only an aborted record and its marker left, yet not settled (err %v)", err)
	}
}

// commitAt is a consumer-group handler that commits off for its claim.
type commitAt int64

func (commitAt) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (commitAt) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (c commitAt) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	s.MarkOffset(claim.Topic(), claim.Partition(), int64(c), "")
	s.Commit()
	return nil
}

// The group's commit (2) is below the log's start (5): sarama finds it out
// of range and begins the claim at the oldest offset. With records left
// above the start the claim settles once it has consumed them; with none,
// at once.
func TestSettlesWhenTheGroupsCommitIsBelowTheLogStart(t *testing.T) {
	for _, left := range []int{0, 5} {
		t.Run(fmt.Sprintf("%d left", left), func(t *testing.T) {
			_, k := newKfake(t, "below-commit", "below-commit-group", 1)
			produceEven(t, k, 1, 5) // offsets 0-4
			cfg := sarama.NewConfig()
			cfg.Version = k.Version
			cfg.Consumer.Offsets.AutoCommit.Enable = false
			cg, err := sarama.NewConsumerGroup(k.Brokers, k.Group, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := cg.Consume(context.Background(), []string{k.Topic}, commitAt(2)); err != nil {
				t.Fatal(err)
			}
			if err := cg.Close(); err != nil {
				t.Fatal(err)
			}
			deleteRecords(t, k, 5)
			produceEven(t, k, 1, left) // offsets 5-

			var handled atomic.Int64
			h := actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil })
			const settle = 300 * time.Millisecond
			bridge := settlingBridge(t, k, testSettings(ordering.Unordered), h, settle)
			runMember(t, k, testSettings(ordering.Unordered), bridge, nil)
			hwm := int64(5 + left)
			waitFor2(t, "the partition read as settled with no lag", 10*time.Second, func() bool {
				ps := bridge.Partitions()
				return len(ps) == 1 && ps[0].HighWatermark == hwm && ps[0].Start == sarama.OffsetOldest && ps[0].Settled && ps[0].Lag() == 0
			})
			if n := handled.Load(); n != int64(left) {
				t.Fatalf("%d records handled, want the %d left", n, left)
			}
		})
	}
}
