package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// claimCounter counts claims started, through the Observer.
type claimCounter struct {
	started atomic.Int64
	drains  atomic.Int64
}

func (c *claimCounter) ClaimStarted(string, int32)        { c.started.Add(1) }
func (c *claimCounter) DrainDone(time.Duration, bool)     { c.drains.Add(1) }
func (c *claimCounter) HandlerDone(string, time.Duration) {}

// The revoke-while-starved case through real sarama against kfake: member A
// holds every partition with each one's only credit taken by a record that
// never finishes, and more records buffered than sarama's channel holds.
// Member B joins; the cooperative rebalance revokes two of A's partitions.
// A's revoked claims must drain within the drain timeout (sarama would
// otherwise wait out Rebalance.Timeout, 60 s here, and tear down A's whole
// session), and A's two retained claims must keep running: no claim of A
// restarts.
func TestCooperativeRevokeWhileStarvedOfCredits(t *testing.T) {
	if testing.Short() {
		t.Skip("integration scenario")
	}
	const partitions, perPartition = 4, 600 // more than sarama's channel holds per partition
	_, k := newKfake(t, "starved", "starved-group", partitions)
	produceEven(t, k, partitions, perPartition)

	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 1
	s.InFlightTotal = partitions
	s.DrainTimeout = time.Second
	held := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
		<-ctx.Done() // a database that never answers: nothing finishes
		return ctx.Err()
	})

	type member struct {
		bridge *actors.Bridge
		claims *claimCounter
		stop   func()
	}
	start := func(name string) *member {
		m := &member{claims: &claimCounter{}}
		var err error
		m.bridge, err = actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: held, Observer: m.claims,
			DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		m.stop = runMember(t, k, s, m.bridge, func(c *sarama.Config) { c.ClientID = name })
		return m
	}
	stop := func(m *member) {
		m.stop()
		checkCredits(t, m.bridge)
	}
	starved := func(m *member, n int) func() bool {
		return func() bool {
			ps := m.bridge.Partitions()
			waiting := 0
			for _, p := range ps {
				if !p.WaitingForCredit.IsZero() {
					waiting++
				}
			}
			return len(ps) == n && waiting == n
		}
	}

	a := start("member-a")
	waitFor2(t, "member A to hold every partition, starved", 30*time.Second, starved(a, partitions))
	if got := a.claims.started.Load(); got != partitions {
		t.Fatalf("member A started %d claims, want %d", got, partitions)
	}
	joined := time.Now()
	b := start("member-b")
	waitFor2(t, "the partitions to be split between A and B", s.DrainTimeout+10*time.Second, func() bool {
		return len(a.bridge.Partitions()) == partitions/2 && len(b.bridge.Partitions()) == partitions/2
	})
	took := time.Since(joined)
	if got := a.claims.started.Load(); got != partitions {
		t.Fatalf("member A started %d claims in all, want %d: its session was torn down", got, partitions)
	}
	if !a.bridge.Joined() {
		t.Fatal("member A left its session")
	}
	t.Logf("B joined and A handed over two starved partitions in %v (drain timeout %v)", took.Round(time.Millisecond), s.DrainTimeout)
	stop(b)
	stop(a)
}

// produceEven writes n records to each partition.
func produceEven(t *testing.T, k actors.KafkaSettings, partitions int32, n int) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	producer, err := sarama.NewSyncProducer(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var batch []*sarama.ProducerMessage
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			batch = append(batch, &sarama.ProducerMessage{Topic: k.Topic, Partition: p,
				Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder("v")})
		}
	}
	if err := producer.SendMessages(batch); err != nil {
		t.Fatal(err)
	}
}

// A partition whose log ends in a transaction marker (and records of an
// aborted transaction) never delivers those offsets under read_committed:
// once the claim has consumed everything, it must read as caught up (no
// lag), not as records waiting, though the high watermark stays past the
// committed offset.
func TestSettledPartitionEndingInTransactionMarkerHasNoLag(t *testing.T) {
	_, k := newKfake(t, "txn-tail", "txn-tail-group", 1)
	producer := transactionalProducer(t, k, "txn-tail-producer")
	txn := func(commit bool, n int) {
		var err error
		if err := producer.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: k.Topic, Value: sarama.StringEncoder("v")}); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			err = producer.CommitTxn()
		} else {
			err = producer.AbortTxn()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	txn(true, 5)
	txn(false, 3) // the log ends with aborted records and their marker

	s := testSettings(ordering.Unordered)
	var handled atomic.Int64
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil })
	const settle = 300 * time.Millisecond
	bridge := settlingBridge(t, k, s, h, settle)
	runMember(t, k, s, bridge, nil)

	var p actors.PartitionState
	waitFor2(t, "the claim to consume the committed records and settle", 20*time.Second, func() bool {
		ps := bridge.Partitions()
		if len(ps) != 1 {
			return false
		}
		p = ps[0]
		return p.Committed == 5 && p.Settled // records 0-4, their commit marker at 5, aborted records and a marker after
	})
	if handled.Load() != 5 {
		t.Fatalf("handled %d records, want the 5 committed ones", handled.Load())
	}
	if gap := p.HighWatermark - p.Position(); gap < 1 {
		t.Fatalf("high watermark %d, position %d: the test needs offsets past the last record", p.HighWatermark, p.Position())
	}
	if p.Lag() != 0 {
		t.Fatalf("lag %d for a partition that has consumed everything (high watermark %d, committed %d)", p.Lag(), p.HighWatermark, p.Committed)
	}
}
