package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// One consumer of two topics: every record of each is handled once, in
// key order per topic (the same key in both topics is two keys), each
// topic's poison record goes to its own dead-letter topic, and every
// partition of both topics is committed to its end.
func TestOneConsumerOfTwoTopics(t *testing.T) {
	broker, err := embedded.Start(2, "orders", "payments")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const keys, perKey = 4, 20
	for _, topic := range []string{"orders", "payments"} {
		var ks, vs []string
		for i := range perKey {
			for k := range keys {
				v := fmt.Sprint(i)
				if poisoned(topic, k, i) {
					v = "poison-" + topic
				}
				ks, vs = append(ks, fmt.Sprint("key-", k)), append(vs, v)
			}
		}
		produce(t, broker.Addrs(), topic, ks, vs)
	}

	var mu sync.Mutex
	seen := map[string][]string{} // topic/key → values in the order handled
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		if strings.HasPrefix(string(r.Value), "poison") {
			return consumer.Permanent(errors.New("poison"))
		}
		mu.Lock()
		defer mu.Unlock()
		k := r.Topic + "/" + string(r.Key)
		seen[k] = append(seen[k], string(r.Value))
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topics: []string{"orders", "payments"}, Group: "two"}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	committedToEnd := func(topic string) bool {
		p, err := offsets.Read(broker.Addrs(), topic, "two")
		if err != nil {
			return false
		}
		for part, end := range p.Ends {
			if p.Committed[part] != end {
				return false
			}
		}
		return len(p.Ends) == 2
	}
	waitFor(t, "both topics committed to their ends", 30*time.Second, func() bool { return committedToEnd("orders") && committedToEnd("payments") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, topic := range []string{"orders", "payments"} {
		for k := range keys {
			var want []string
			for i := range perKey {
				if !poisoned(topic, k, i) {
					want = append(want, fmt.Sprint(i))
				}
			}
			key := fmt.Sprint(topic, "/key-", k)
			if got := strings.Join(seen[key], ","); got != strings.Join(want, ",") {
				t.Errorf("%s handled %s, want %s", key, got, strings.Join(want, ","))
			}
		}
		letter := readDeadLetter(t, broker.Addrs(), topic+".dlq")
		if string(letter.GetValue()) != "poison-"+topic || letter.GetOriginalTopic() != topic {
			t.Errorf("%s.dlq holds %q from %s, want its own topic's poison record", topic, letter.GetValue(), letter.GetOriginalTopic())
		}
	}
	if s := c.Stats(); s.Succeeded != 2*keys*perKey-3 || s.DeadLettered != 3 {
		t.Errorf("stats %+v", s)
	}
	// Counted per topic too: orders has one poison record, payments two.
	want := map[string]consumer.TopicStats{"orders": {Succeeded: keys*perKey - 1, DeadLettered: 1},
		"payments": {Succeeded: keys*perKey - 2, DeadLettered: 2}}
	if got := c.Stats().ByTopic; !maps.Equal(got, want) {
		t.Errorf("stats by topic %+v, want %+v", got, want)
	}
}

// poisoned says which records of TestOneConsumerOfTwoTopics are poison:
// one of orders, two of payments, so their counts tell them apart.
func poisoned(topic string, key, i int) bool {
	return (key == 1 && i == 5) || (topic == "payments" && key == 2 && i == 7)
}

// The topics a Config names are checked: at least one, none twice, and no
// dead-letter topic among them.
func TestTopicsAreChecked(t *testing.T) {
	h := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })
	base := consumer.Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g"}
	for name, c := range map[string]struct {
		topic  string
		topics []string
		dlq    string
		field  string
	}{
		"none":                      {field: "Topic"},
		"one named twice":           {topics: []string{"a", "b", "a"}, field: "Topics"},
		"an empty name":             {topics: []string{"a", " "}, field: "Topics"},
		"a topic's default dlq":     {topics: []string{"a", "a.dlq"}, field: "DeadLetterTopic"},
		"the shared dlq a source":   {topics: []string{"a", "b"}, dlq: "b", field: "DeadLetterTopic"},
		"Topic the dead-letter one": {topic: "x", dlq: "x", field: "DeadLetterTopic"},
	} {
		cfg := base
		cfg.Topic, cfg.Topics, cfg.DeadLetterTopic = c.topic, c.topics, c.dlq
		_, err := consumer.New(cfg, h)
		if err == nil || !strings.Contains(err.Error(), "consumer.Config."+c.field) {
			t.Errorf("%s: error %v, want one naming %s", name, err, c.field)
		}
	}
	for name, c := range map[string]struct {
		topic  string
		topics []string
	}{"Topic alone": {topic: "a"}, "Topics alone": {topics: []string{"a", "b"}}, "Topic among Topics": {topic: "a", topics: []string{"a", "b"}},
		"Topic beside Topics": {topic: "c", topics: []string{"a", "b"}}} {
		cfg := base
		cfg.Topic, cfg.Topics = c.topic, c.topics
		if _, err := consumer.New(cfg, h); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Partitions added to a topic while the consumer runs are claimed within
// the documented bound (twice the metadata refresh, plus a rebalance), and
// the records produced to them are handled, none lost.
func TestPartitionsAddedWhileRunningAreClaimed(t *testing.T) {
	broker, err := embedded.Start(2, "grows")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	var mu sync.Mutex
	handled := map[int32]int{}
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[r.Partition]++
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "grows", Group: "grows"}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "the two partitions claimed", 20*time.Second, func() bool { return len(c.Partitions()) == 2 })

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(broker.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	added := time.Now()
	if err := admin.CreatePartitions("grows", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	bound := 2*actors.MetadataRefresh + 10*time.Second
	waitFor(t, "the new partitions claimed", bound, func() bool { return len(c.Partitions()) == 4 })
	t.Logf("partitions added were claimed %v later (bound %v)", time.Since(added).Round(100*time.Millisecond), bound)

	producer, err := sarama.NewSyncProducer(broker.Addrs(), func() *sarama.Config {
		p := sarama.NewConfig()
		p.Producer.Return.Successes = true
		p.Producer.Partitioner = sarama.NewManualPartitioner
		return p
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for p := int32(0); p < 4; p++ {
		for i := range 5 {
			if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "grows", Partition: p, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "every partition's records handled", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled[0] == 5 && handled[1] == 5 && handled[2] == 5 && handled[3] == 5
	})
}

// The group's lag on a topic counts every partition of it, those added
// while the consumer runs included, claimed or not: paused with records in
// every partition, patchflow_topic_lag_records holds them all; resumed, it
// falls to 0 with every partition held by a member.
func TestTopicLagCountsPartitionsAddedWhileRunning(t *testing.T) {
	broker, err := embedded.Start(2, "lagged")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	reg := prometheus.NewRegistry()
	h := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "lagged", Group: "lagged"}, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	gauge := func(name string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "topic" && l.GetValue() == "lagged" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	topic := func() [4]float64 {
		return [4]float64{gauge("patchflow_topic_partitions"), gauge("patchflow_topic_unclaimed_partitions"),
			gauge("patchflow_topic_lag_records"), gauge("patchflow_topic_unclaimed_lag_records")}
	}
	waitFor(t, "the two partitions claimed", 20*time.Second, func() bool { return len(c.Partitions()) == 2 })
	c.Pause()
	produceTo := func(p int32) {
		// A new producer each time: one made before the partitions were
		// added would not know them yet.
		producer, err := sarama.NewSyncProducer(broker.Addrs(), func() *sarama.Config {
			c := sarama.NewConfig()
			c.Producer.Return.Successes = true
			c.Producer.Partitioner = sarama.NewManualPartitioner
			return c
		}())
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		for i := range 3 {
			if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "lagged", Partition: p, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produceTo(0)
	produceTo(1)
	bound := actors.MetadataRefresh + 10*time.Second // the next read, and its own timeout
	waitFor(t, "the lag of the two claimed partitions", bound, func() bool { return topic() == [4]float64{2, 0, 6, 0} })

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(broker.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreatePartitions("lagged", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	produceTo(2)
	produceTo(3)
	waitFor(t, "the lag of all four partitions, claimed or not", bound, func() bool {
		v := topic()
		return v[0] == 4 && v[2] == 12
	})
	c.Resume()
	waitFor(t, "every partition held and caught up", 2*actors.MetadataRefresh+bound, func() bool { return topic() == [4]float64{4, 0, 0, 0} })
}
