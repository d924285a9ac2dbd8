package actors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// The rebalance scenario, against the in-process kfake broker speaking the
// real Kafka protocol: 4 partitions, 50,000 records over 2,000 keys, a
// handler with 0-20 ms latency, 1% transient failures and 0.1% permanent
// ones. Two members start, a third joins and one leaves mid-run.
const (
	scenarioPartitions = 4
	scenarioRecords    = 50_000
	scenarioKeys       = 2_000
)

func TestRebalanceCooperative(t *testing.T) { runRebalanceScenario(t, "cooperative-sticky") }
func TestRebalanceEager(t *testing.T)       { runRebalanceScenario(t, "sticky") }

type tp struct {
	partition int32
	offset    int64
}

// scenarioWorld is what every member shares: the record of what happened.
type scenarioWorld struct {
	mu          sync.Mutex
	successes   map[tp]int
	attempts    map[tp]int
	deadLetters map[tp]int // acknowledged dead-letter writes
	runningKey  map[string]int
	overlaps    []string
	violations  []string
	checked     [scenarioPartitions]int64 // offsets below were verified finished
	handled     atomic.Int64
}

func (w *scenarioWorld) finished(k tp) bool { return w.successes[k] > 0 || w.deadLetters[k] > 0 }

func (w *scenarioWorld) Handle(ctx context.Context, r *messages.Record) error {
	k := tp{r.GetPartition(), r.GetOffset()}
	key := string(r.GetKey())
	w.mu.Lock()
	w.attempts[k]++
	attempt := w.attempts[k]
	w.runningKey[key]++
	if w.runningKey[key] > 1 {
		w.overlaps = append(w.overlaps, fmt.Sprintf("%s at %d/%d", key, k.partition, k.offset))
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.runningKey[key]--
		w.mu.Unlock()
	}()

	select {
	case <-time.After(time.Duration(rand.IntN(21)) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	value := string(r.GetValue())
	switch {
	case strings.HasSuffix(value, ";permanent"):
		return messages.Permanent(fmt.Errorf("invalid record %s", value))
	case strings.HasSuffix(value, ";transient") && attempt == 1:
		return messages.Transient(fmt.Errorf("dependency unavailable for %s", value))
	}
	w.mu.Lock()
	w.successes[k]++
	w.mu.Unlock()
	w.handled.Add(1)
	return nil
}

// watchingMarker checks every mark against what has finished, across all
// members: a mark may never pass an offset that is not finished.
type watchingMarker struct {
	inner actors.OffsetMarker
	world *scenarioWorld
}

func (m watchingMarker) MarkOffset(topic string, p int32, offset int64, md string) {
	w := m.world
	w.mu.Lock()
	for o := w.checked[p]; o < offset; o++ {
		if !w.finished(tp{p, o}) {
			w.violations = append(w.violations, fmt.Sprintf("mark %d/%d passes unfinished offset %d", p, offset, o))
			break
		}
		w.checked[p] = o + 1
	}
	m.checkMetadata(p, offset, md)
	w.mu.Unlock()
	m.inner.MarkOffset(topic, p, offset, md)
}

// ResetOffset checks the new metadata of the last mark, as MarkOffset does.
func (m watchingMarker) ResetOffset(topic string, p int32, offset int64, md string) {
	m.world.mu.Lock()
	m.checkMetadata(p, offset, md)
	m.world.mu.Unlock()
	m.inner.ResetOffset(topic, p, offset, md)
}

// checkMetadata records a violation when the commit metadata calls finished
// an offset that is not (every offset of the scenario's topic holds a
// record). The world is locked.
func (m watchingMarker) checkMetadata(p int32, offset int64, md string) {
	if md == "" {
		return
	}
	w := m.world
	r, err := ledger.DecodeMetadata(md)
	if err != nil || r.Base != offset {
		w.violations = append(w.violations, fmt.Sprintf("commit metadata %q with offset %d/%d: %v", md, p, offset, err))
		return
	}
	for o := r.Base; o < r.End; o++ {
		if r.Finished(o) && !w.finished(tp{p, o}) {
			w.violations = append(w.violations, fmt.Sprintf("commit metadata %q calls unfinished offset %d/%d finished", md, p, o))
			return
		}
	}
}

// countingDeadLetters records acknowledged writes.
type countingDeadLetters struct {
	inner actors.DeadLetterWriter
	world *scenarioWorld
}

func (d countingDeadLetters) Write(ctx context.Context, l *messages.DeadLetter) error {
	if err := d.inner.Write(ctx, l); err != nil {
		return err
	}
	d.world.mu.Lock()
	d.world.deadLetters[tp{l.GetOriginalPartition(), l.GetOriginalOffset()}]++
	d.world.mu.Unlock()
	return nil
}

func runRebalanceScenario(t *testing.T, assignor string) {
	if testing.Short() {
		t.Skip("integration scenario")
	}
	topic, dlqTopic, group := "events", "events.dlq", "scenario-"+assignor
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(scenarioPartitions, topic), kfake.SeedTopics(1, dlqTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	k := actors.KafkaSettings{Brokers: brokers, Topic: topic, Group: group, DLQTopic: dlqTopic, Version: sarama.V3_6_0_0,
		Assignor: assignor, SessionTimeout: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond}
	wantDead := produceScenario(t, k)

	world := &scenarioWorld{successes: map[tp]int{}, attempts: map[tp]int{}, deadLetters: map[tp]int{}, runningKey: map[string]int{}}
	settings := testSettings(ordering.ByKey)
	settings.InFlightPerPartition = 16
	settings.InFlightTotal = 48
	settings.DrainTimeout = 5 * time.Second
	settings.MaxAttempts = 4
	settings.ConsumerGroup = group

	pcfg, err := actors.NewProducerConfig(k)
	if err != nil {
		t.Fatal(err)
	}
	producer, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	dlq := countingDeadLetters{inner: &actors.KafkaDeadLetters{Producer: producer, Topic: dlqTopic}, world: world}

	type member struct {
		bridge *actors.Bridge
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(name string) member {
		system := newTestSystem(t)
		bridge, err := actors.NewBridge(actors.BridgeConfig{
			System: system, Settings: settings, Handler: world, DeadLetters: dlq, Committed: committedReader(t, k),
			WrapMarker: func(m actors.OffsetMarker) actors.OffsetMarker { return watchingMarker{inner: m, world: world} },
		})
		if err != nil {
			t.Fatal(err)
		}
		ccfg, err := actors.NewConsumerConfig(k, settings)
		if err != nil {
			t.Fatal(err)
		}
		ccfg.ClientID = name
		cg, err := sarama.NewConsumerGroup(brokers, group, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = actors.RunMember(ctx, cg, []string{topic}, bridge, discardLogger())
		}()
		return member{bridge: bridge, cancel: cancel, done: done}
	}
	stop := func(m member) {
		m.cancel()
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			t.Fatal("member did not stop within 30s")
		}
		checkCredits(t, m.bridge)
	}

	began := time.Now()
	a, b := start("member-a"), start("member-b")
	waitFor2(t, "a fifth of the records", 60*time.Second, func() bool { return world.handled.Load() >= scenarioRecords/5 })
	c := start("member-c")
	waitFor2(t, "half of the records", 60*time.Second, func() bool { return world.handled.Load() >= scenarioRecords/2 })
	stop(a)

	// The end: every partition committed up to its high watermark.
	hwm := highWatermarks(t, brokers, topic)
	waitFor2(t, "committed offsets to reach the high watermarks", 90*time.Second, func() bool {
		committed := committedOffsets(t, brokers, group, topic)
		for p := int32(0); p < scenarioPartitions; p++ {
			if committed[p] != hwm[p] {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(began)
	stop(b)
	stop(c)

	world.mu.Lock()
	defer world.mu.Unlock()
	if len(world.violations) > 0 {
		t.Fatalf("%d marks passed unfinished offsets, first: %s", len(world.violations), world.violations[0])
	}
	if len(world.overlaps) > 0 {
		t.Fatalf("%d times a key ran concurrently, first: %s", len(world.overlaps), world.overlaps[0])
	}
	duplicates, lost := 0, 0
	for p := int32(0); p < scenarioPartitions; p++ {
		for o := int64(0); o < hwm[p]; o++ {
			key := tp{p, o}
			switch {
			case wantDead[key]:
				if world.successes[key] > 0 {
					t.Errorf("permanently failing record %d/%d succeeded", p, o)
				}
				if world.deadLetters[key] == 0 {
					t.Errorf("record %d/%d was not dead-lettered", p, o)
				}
			case world.successes[key] == 0:
				lost++
				if world.deadLetters[key] > 0 {
					t.Errorf("record %d/%d dead-lettered unexpectedly", p, o)
				}
			case world.successes[key] > 1:
				duplicates += world.successes[key] - 1
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d records never handled", lost)
	}
	gotDead := readDeadLetters(t, brokers, dlqTopic)
	for key := range wantDead {
		if !gotDead[key] {
			t.Errorf("dead-letter topic lacks %d/%d", key.partition, key.offset)
		}
	}
	for key := range gotDead {
		if !wantDead[key] {
			t.Errorf("dead-letter topic has unexpected %d/%d", key.partition, key.offset)
		}
	}
	t.Logf("%s: %d records, %d dead-lettered (as expected), %d duplicates handled, 0 lost, %v to commit everything",
		assignor, scenarioRecords, len(wantDead), duplicates, elapsed.Round(time.Millisecond))
}

// produceScenario writes the records and returns the ones that fail permanently.
func produceScenario(t *testing.T, k actors.KafkaSettings) map[tp]bool {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = k.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	producer, err := sarama.NewSyncProducer(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	batch := make([]*sarama.ProducerMessage, 0, 1000)
	var all []*sarama.ProducerMessage
	for i := 0; i < scenarioRecords; i++ {
		value := fmt.Sprintf("record-%d", i)
		switch {
		case i%1000 == 7:
			value += ";permanent"
		case i%100 == 3:
			value += ";transient"
		}
		m := &sarama.ProducerMessage{Topic: k.Topic, Key: sarama.StringEncoder(fmt.Sprintf("host-%04d", rng.IntN(scenarioKeys))), Value: sarama.StringEncoder(value)}
		batch = append(batch, m)
		all = append(all, m)
		if len(batch) == cap(batch) || i == scenarioRecords-1 {
			if err := producer.SendMessages(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	dead := map[tp]bool{}
	for _, m := range all {
		v, _ := m.Value.Encode()
		if strings.HasSuffix(string(v), ";permanent") {
			dead[tp{m.Partition, m.Offset}] = true
		}
	}
	return dead
}

func highWatermarks(t *testing.T, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	client, err := sarama.NewClient(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out := map[int32]int64{}
	for p := int32(0); p < scenarioPartitions; p++ {
		if out[p], err = client.GetOffset(topic, p, sarama.OffsetNewest); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func committedOffsets(t *testing.T, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, b := range res.Blocks[topic] {
		out[p] = b.Offset
	}
	return out
}

func readDeadLetters(t *testing.T, brokers []string, topic string) map[tp]bool {
	t.Helper()
	consumer, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	client, err := sarama.NewClient(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[tp]bool{}
	if end == 0 {
		return out
	}
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for {
		select {
		case m := <-pc.Messages():
			var l messages.DeadLetter
			if err := proto.Unmarshal(m.Value, &l); err != nil {
				t.Fatalf("dead letter at %d does not decode: %v", m.Offset, err)
			}
			if l.GetErrorClass() != messages.ErrorClass_ERROR_CLASS_PERMANENT || !strings.HasPrefix(l.GetError(), "invalid record") {
				t.Errorf("dead letter %d/%d: class %v, error %q", l.GetOriginalPartition(), l.GetOriginalOffset(), l.GetErrorClass(), l.GetError())
			}
			out[tp{l.GetOriginalPartition(), l.GetOriginalOffset()}] = true
			if m.Offset == end-1 {
				return out
			}
		case <-time.After(10 * time.Second):
			t.Fatal("dead-letter topic read timed out")
		}
	}
}

func waitFor2(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
