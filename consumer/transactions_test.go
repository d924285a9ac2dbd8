package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Under CommitTransactional a crash leaves no result behind that its
// commit did not take, and the next owner's run adds each missing one
// once: read under read_committed, every record's results are there
// exactly once, in key order, even though the crash cut a transaction that
// held results (read_uncommitted shows them) and the rerun wrote them
// again.
func TestTransactionalResultsAreExactlyOnceAcrossACrash(t *testing.T) {
	broker, err := embedded.Start(2, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	exactlyOnceAcrossACrash(t, broker.Addrs(), "3.6.0", "in", "out", "txn")
}

// The same on a real broker (make test-kafka, make e2e).
func TestRealBrokerTransactionalResultsAreExactlyOnceAcrossACrash(t *testing.T) {
	env := os.Getenv("PATCHFLOW_KAFKA_BROKERS")
	if env == "" {
		t.Skip("PATCHFLOW_KAFKA_BROKERS is not set (make test-kafka runs this against a real broker)")
	}
	brokers, version := strings.Split(env, ","), os.Getenv("PATCHFLOW_KAFKA_VERSION")
	if version == "" {
		version = "3.6.0"
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	id := fmt.Sprintf("%x", rand.Uint32())
	in, out := "txn-in-"+id, "txn-out-"+id
	for _, topic := range []string{in, out} {
		if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
	}
	exactlyOnceAcrossACrash(t, brokers, version, in, out, "txn-"+id)
}

func exactlyOnceAcrossACrash(t *testing.T, brokers []string, version, in, out, group string) {
	const n, keys = 600, 20
	ks, vs := make([]string, n), make([]string, n)
	for i := range n {
		ks[i], vs[i] = fmt.Sprint("k", i%keys), strconv.Itoa(i)
	}
	produce(t, brokers, in, ks, vs)

	var handled atomic.Int64
	var failedOnce atomic.Bool
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		r.Produce(consumer.Message{Topic: out, Key: r.Key, Value: r.Value})
		if string(r.Value) == "7" && failedOnce.CompareAndSwap(false, true) {
			return errors.New("failed after producing") // this attempt's result is dropped
		}
		handled.Add(1)
		return nil
	})
	cfg := consumer.Config{Brokers: brokers, Topic: in, Group: group, KafkaVersion: version, CommitMode: consumer.CommitTransactional,
		CommitInterval: 30 * time.Millisecond, BackoffMin: 10 * time.Millisecond, InFlightTotal: 32}

	// The first run crashes a third of the way in.
	c, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "a third handled", 30*time.Second, func() bool { return handled.Load() >= n/3 })
	consumer.Crash(true) // from here on nothing commits: what runs on is cut
	// Records handled from here on are in a transaction the crash cuts:
	// wait for some, or a crash just after a commit, with nothing handled
	// before the stop, would cut nothing and the test would prove nothing.
	cut := handled.Load()
	waitFor(t, "records handled after the crash", 30*time.Second, func() bool { return handled.Load() >= cut+8 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	consumer.Crash(false)
	firstRun := handled.Load()

	// The second runs to the end.
	c, err = consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop = run(c)
	waitFor(t, "everything committed", 60*time.Second, func() bool {
		p, err := offsets.Read(brokers, in, group)
		return err == nil && p.Committed[0] == p.Ends[0] && p.Committed[1] == p.Ends[1]
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if handled.Load() <= n {
		t.Errorf("handled %d times in all (%d in the first run): the crash cut nothing, so the test proves nothing", handled.Load(), firstRun)
	}

	committed := readIsolated(t, brokers, out, sarama.ReadCommitted)
	seen := map[string]int{}
	order := map[string]int{}
	for _, m := range committed {
		seen[string(m.Value)]++
		v, _ := strconv.Atoi(string(m.Value))
		if last, ok := order[string(m.Key)]; ok && v < last {
			t.Errorf("key %s: result %d after %d", m.Key, v, last)
		}
		order[string(m.Key)] = v
	}
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d has %d committed results, want 1", i, c)
		}
	}
	if len(committed) != n {
		t.Errorf("%d committed results, want %d", len(committed), n)
	}
	all := readIsolated(t, brokers, out, sarama.ReadUncommitted)
	if len(all) <= n {
		t.Errorf("%d results written in all, %d committed: the crash aborted none, so the test proves nothing", len(all), len(committed))
	}
	t.Logf("handled %d times (%d in the first run); %d results written, %d committed", handled.Load(), firstRun, len(all), len(committed))
}

// readIsolated reads every record of topic up to its end under isolation.
func readIsolated(t *testing.T, brokers []string, topic string, isolation sarama.IsolationLevel) []*sarama.ConsumerMessage {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.IsolationLevel = isolation
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []*sarama.ConsumerMessage
	for _, p := range parts {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		// Every write ended before the read: the partition is read once
		// nothing comes for a second (its last offsets are transaction
		// markers, never delivered).
	read:
		for {
			select {
			case m := <-pc.Messages():
				out = append(out, m)
				if m.Offset >= end-1 {
					break read
				}
			case <-time.After(time.Second):
				break read
			}
		}
		pc.Close()
	}
	return out
}
