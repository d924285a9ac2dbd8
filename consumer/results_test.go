package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Results a handler produces reach their topic before the record counts
// as finished, each key's in order, tagged with their source; an attempt
// that fails produces nothing (its retry does); a result too large for
// any retry dead-letters its record.
func TestResultsAreProducedBeforeTheRecordFinishes(t *testing.T) {
	broker, err := embedded.Start(2, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const keys, perKey = 3, 10
	var ks, vs []string
	for i := range perKey {
		for k := range keys {
			ks, vs = append(ks, fmt.Sprint("k", k)), append(vs, fmt.Sprint(i))
		}
	}
	ks, vs = append(ks, "big"), append(vs, "big")
	produce(t, broker.Addrs(), "in", ks, vs)

	var failedOnce atomic.Bool
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		if string(r.Value) == "big" {
			r.Produce(consumer.Message{Topic: "out", Key: r.Key, Value: make([]byte, 2<<20)})
			return nil
		}
		r.Produce(consumer.Message{Topic: "out", Key: r.Key, Value: []byte(string(r.Value) + "a")},
			consumer.Message{Topic: "out", Key: r.Key, Value: []byte(string(r.Value) + "b"), Headers: []consumer.Header{{Key: []byte("h"), Value: []byte("v")}}})
		if string(r.Key) == "k1" && string(r.Value) == "4" && failedOnce.CompareAndSwap(false, true) {
			return errors.New("failed after producing") // this attempt's results are dropped
		}
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "in", Group: "results", BackoffMin: 10 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "every record finished", 30*time.Second, func() bool { s := c.Stats(); return s.Succeeded == keys*perKey && s.DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	p, err := offsets.Read(broker.Addrs(), "in", "results")
	if err != nil || p.Committed[0] != p.Ends[0] || p.Committed[1] != p.Ends[1] {
		t.Fatalf("committed %v of %v: %v", p.Committed, p.Ends, err)
	}

	ends, err := offsets.Read(broker.Addrs(), "out", "results")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, end := range ends.Ends {
		total += end
	}
	if total != 2*keys*perKey {
		t.Errorf("%d results, want %d: each success's two, none of the failed attempt, none of the dead-lettered record", total, 2*keys*perKey)
	}
	got := map[string][]string{}
	for _, m := range readAll(t, broker.Addrs(), "out", 2*keys*perKey) {
		k := string(m.Key)
		got[k] = append(got[k], string(m.Value))
		h := map[string]string{}
		for _, x := range m.Headers {
			h[string(x.Key)] = string(x.Value)
		}
		if h[consumer.ResultSourceTopicHeader] != "in" || h[consumer.ResultSourceOffsetHeader] == "" || h[consumer.ResultSourcePartitionHeader] == "" {
			t.Errorf("result %s/%s without its source headers: %v", k, m.Value, h)
		}
		if strings.HasSuffix(string(m.Value), "b") && h["h"] != "v" {
			t.Errorf("result %s/%s lost its own header", k, m.Value)
		}
	}
	for k := range keys {
		var want []string
		for i := range perKey {
			want = append(want, fmt.Sprint(i, "a"), fmt.Sprint(i, "b"))
		}
		key := fmt.Sprint("k", k)
		if strings.Join(got[key], ",") != strings.Join(want, ",") {
			t.Errorf("%s's results %v, want %v in order", key, got[key], want)
		}
	}
}

// readAll reads n records of topic (every partition), failing after 10 s.
func readAll(t *testing.T, brokers []string, topic string, n int) []*sarama.ConsumerMessage {
	t.Helper()
	client, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan *sarama.ConsumerMessage, n+16)
	for _, p := range parts {
		pc, err := client.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				found <- m
			}
		}()
	}
	var out []*sarama.ConsumerMessage
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m := <-found:
			out = append(out, m)
		case <-timeout:
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
	}
	return out
}
