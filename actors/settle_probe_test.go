package actors_test

import (
	"context"
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

// fetchProbe is the listener's settle probe, on a client of its own.
func fetchProbe(t *testing.T, k actors.KafkaSettings) actors.SettleProbe {
	t.Helper()
	cfg, err := actors.NewConsumerConfig(k, testSettings(ordering.Unordered))
	if err != nil {
		t.Fatal(err)
	}
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return actors.NewFetchProbe(client, cfg.Consumer.IsolationLevel)
}

// neverSettles watches the bridge's only partition for d, asking as the
// readiness check does (every 50 ms), and fails if it ever reads as caught
// up while offsets remain below its high watermark.
func neverSettles(t *testing.T, bridge *actors.Bridge, d time.Duration, what string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ps := bridge.Partitions()
		if len(ps) != 1 {
			t.Fatalf("partitions %d", len(ps))
		}
		if p := ps[0]; p.HighWatermark > p.Position() && p.Lag() == 0 {
			t.Fatalf("%s (high watermark %d, position %d), yet the partition reads settled with lag 0", what, p.HighWatermark, p.Position())
		}
	}
}

// Under read_committed an open transaction holds the last stable offset
// back: committed records written after it (here by an ordinary producer)
// cannot be fetched until the transaction ends (up to
// transaction.timeout.ms). The claim then delivers nothing, with nothing
// buffered and no fetch error; it must not read as settled, since records
// wait, and the stall rule must be able to see it.
func TestNotSettledWhileAnOpenTransactionHoldsRecords(t *testing.T) {
	topic, group := "txn-open", "txn-open-group"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	k := actors.KafkaSettings{Brokers: brokers, Topic: topic, Group: group, Version: sarama.V3_6_0_0,
		SessionTimeout: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond}
	produceEven(t, k, 1, 3) // offsets 0-2: ordinary records, consumed

	// A transactional producer opens a transaction and hangs in it.
	pcfg := sarama.NewConfig()
	pcfg.Version = k.Version
	pcfg.Producer.Idempotent = true
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Transaction.ID = "txn-open-producer"
	pcfg.Net.MaxOpenRequests = 1
	tp, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if err := tp.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("open")}); err != nil {
		t.Fatal(err)
	}
	produceEven(t, k, 1, 5) // five ordinary, committed records behind it

	s := testSettings(ordering.Unordered)
	var handled atomic.Int64
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil })
	const settle = 300 * time.Millisecond
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h, IdleSettle: settle,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		SettleProbe: fetchProbe(t, k)})
	if err != nil {
		t.Fatal(err)
	}
	ccfg, err := actors.NewConsumerConfig(k, s)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := sarama.NewConsumerGroup(brokers, group, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = actors.RunMember(ctx, cg, []string{topic}, bridge, discardLogger())
	}()
	defer func() { cancel(); <-stopped }()
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
	topic, group := "silent", "silent-group"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	k := actors.KafkaSettings{Brokers: brokers, Topic: topic, Group: group, Version: sarama.V3_6_0_0,
		SessionTimeout: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond}
	for range 10 { // ten batches of one record
		produceEven(t, k, 1, 1)
	}
	var failing atomic.Bool
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !failing.Load() {
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
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	s := testSettings(ordering.Unordered)
	var handled atomic.Int64
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error {
		failing.Store(true) // from the first record on, the leader "moves" and every fetch fails
		handled.Add(1)
		return nil
	})
	const settle = 500 * time.Millisecond
	bridge, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h, IdleSettle: settle,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		SettleProbe: fetchProbe(t, k)})
	if err != nil {
		t.Fatal(err)
	}
	ccfg, err := actors.NewConsumerConfig(k, s)
	if err != nil {
		t.Fatal(err)
	}
	ccfg.Consumer.Fetch.Default = 1 // one batch per fetch
	ccfg.Consumer.Retry.Backoff = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(brokers, group, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = actors.RunMember(ctx, cg, []string{topic}, bridge, discardLogger())
	}()
	defer func() { cancel(); <-stopped }()
	waitFor2(t, "a first record handled", 20*time.Second, func() bool { return handled.Load() > 0 })
	neverSettles(t, bridge, settle+2*time.Second, "records wait while every fetch fails (NOT_LEADER_FOR_PARTITION)")
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
