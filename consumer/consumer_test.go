package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// New names every field it refuses, and only those.
func TestNewNamesEachBadField(t *testing.T) {
	ok := consumer.Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "events", Group: "g"}
	h := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })
	if _, err := consumer.New(ok, h); err != nil {
		t.Fatalf("three fields are a whole configuration: %v", err)
	}
	for _, c := range []struct {
		field string
		edit  func(*consumer.Config)
	}{
		{"Brokers", func(c *consumer.Config) { c.Brokers = nil }},
		{"Brokers", func(c *consumer.Config) { c.Brokers = []string{"user:secret@kafka:9092"} }},
		{"Topic", func(c *consumer.Config) { c.Topic = " " }},
		{"Group", func(c *consumer.Config) { c.Group = "" }},
		{"DeadLetterTopic", func(c *consumer.Config) { c.DeadLetterTopic = "events" }},
		{"KafkaVersion", func(c *consumer.Config) { c.KafkaVersion = "0.10.2" }},
		{"KafkaVersion", func(c *consumer.Config) { c.KafkaVersion = "latest" }},
		{"Assignor", func(c *consumer.Config) { c.KafkaVersion = "2.3.0" }},
		{"Assignor", func(c *consumer.Config) { c.Assignor = "random" }},
		{"Isolation", func(c *consumer.Config) { c.Isolation = "serializable" }},
		{"HeartbeatInterval", func(c *consumer.Config) { c.SessionTimeout = 6 * time.Second; c.HeartbeatInterval = 3 * time.Second }},
		{"Security.SASLUser", func(c *consumer.Config) { c.Security.SASLMechanism = "PLAIN" }},
		{"Security.KeyFile", func(c *consumer.Config) { c.Security.CertFile = "c.pem" }},
		{"Concurrency", func(c *consumer.Config) { c.Concurrency = "elastic" }},
		{"ConcurrencyLaw", func(c *consumer.Config) { c.ConcurrencyLaw = "pid" }},
		{"Ordering", func(c *consumer.Config) { c.Ordering = "random" }},
		{"span per partition", func(c *consumer.Config) { c.SpanPerPartition = 3 }},
	} {
		cfg := ok
		c.edit(&cfg)
		_, err := consumer.New(cfg, h)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want an error naming it", c.field, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the credentials: %v", c.field, err)
		}
	}
	if _, err := consumer.New(ok, nil); err == nil {
		t.Error("a nil handler was accepted")
	}
}

// produce writes one record per value, keyed by keys[i].
func produce(t *testing.T, brokers []string, topic string, keys, values []string) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, v := range values {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(keys[i]), Value: sarama.StringEncoder(v)}
		if _, _, err := p.SendMessage(msg); err != nil {
			t.Fatal(err)
		}
	}
}

// run starts c and returns a stop that cancels it and returns Run's result.
func run(c *consumer.Consumer) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() error { cancel(); return <-done }
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The whole use on one broker, with only the three required fields: the
// consumer creates the dead-letter topic nobody named, dead-letters the
// poison record there, keeps each key's records in order, and commits
// every partition to its end, drained and committed at ctx.Done().
func TestConsumerCommitsToTheEndKeepsKeyOrderAndDeadLetters(t *testing.T) {
	broker, err := embedded.Start(4, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const keys, perKey = 8, 25
	var ks, vs []string
	for i := range perKey {
		for k := range keys {
			v := fmt.Sprint(i)
			if k == 3 && i == 7 {
				v = "poison"
			}
			ks, vs = append(ks, fmt.Sprint("key-", k)), append(vs, v)
		}
	}
	produce(t, broker.Addrs(), "events", ks, vs)

	var mu sync.Mutex
	seen := map[string][]string{}
	running := map[string]bool{}
	var overlaps int
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		k := string(r.Key)
		mu.Lock()
		if running[k] {
			overlaps++
		}
		running[k] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		running[k] = false
		if string(r.Value) == "poison" {
			return consumer.Permanent(errors.New("not a number"))
		}
		if r.Timestamp.IsZero() || r.Topic != "events" {
			return consumer.Permanent(fmt.Errorf("record without its topic or timestamp: %+v", r))
		}
		seen[k] = append(seen[k], string(r.Value))
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "example"}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	committedToEnd := func() bool {
		p, err := offsets.Read(broker.Addrs(), "events", "example")
		if err != nil {
			return false
		}
		for part, end := range p.Ends {
			if p.Committed[part] != end {
				return false
			}
		}
		return len(p.Ends) == 4
	}
	waitFor(t, "every partition committed to its end", 30*time.Second, committedToEnd)
	if err := stop(); err != nil {
		t.Fatalf("Run after ctx.Done(): %v", err)
	}
	if !committedToEnd() {
		t.Fatal("the final commit moved back")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlaps != 0 {
		t.Errorf("%d records ran beside another of their key", overlaps)
	}
	for k := range keys {
		key := fmt.Sprint("key-", k)
		var want []string
		for i := range perKey {
			if !(k == 3 && i == 7) {
				want = append(want, fmt.Sprint(i))
			}
		}
		if got := strings.Join(seen[key], ","); got != strings.Join(want, ",") {
			t.Errorf("%s handled %s, want %s in order, once each", key, got, strings.Join(want, ","))
		}
	}
	s := c.Stats()
	if s.Succeeded != keys*perKey-1 || s.DeadLettered != 1 || s.InFlight != 0 {
		t.Errorf("stats %+v: want %d succeeded, 1 dead-lettered, none in flight", s, keys*perKey-1)
	}
	letter := readDeadLetter(t, broker.Addrs(), "events.dlq")
	if string(letter.GetValue()) != "poison" || string(letter.GetKey()) != "key-3" || !strings.Contains(letter.GetError(), "not a number") {
		t.Errorf("dead letter %v: want the poison record of key-3 with its error", letter)
	}
}

// readDeadLetter returns the one envelope on topic (any partition).
func readDeadLetter(t *testing.T, brokers []string, topic string) *messages.DeadLetter {
	t.Helper()
	client, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatalf("the dead-letter topic %s: %v", topic, err)
	}
	found := make(chan *sarama.ConsumerMessage, len(parts))
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
	select {
	case m := <-found:
		var d messages.DeadLetter
		if err := proto.Unmarshal(m.Value, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	case <-time.After(10 * time.Second):
		t.Fatalf("no dead letter on %s", topic)
	}
	return nil
}

// The committed-offset reader always runs: a second owner of the
// partitions skips the records the first finished above its committed
// offset (one pinned record held that offset back) and runs only the
// unfinished one again.
func TestSecondOwnerRunsOnlyWhatTheFirstLeftUnfinished(t *testing.T) {
	broker, err := embedded.Start(1, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	keys, values := make([]string, 50), make([]string, 50)
	for i := range values {
		keys[i], values[i] = fmt.Sprint("k", i), fmt.Sprint(i)
	}
	produce(t, broker.Addrs(), "events", keys, values)
	cfg := consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "resume", DrainTimeout: 500 * time.Millisecond,
		CommitInterval: 20 * time.Millisecond, Concurrency: "fixed"}
	first := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if r.Offset == 0 {
			<-ctx.Done() // pinned: never finishes, so offset 0 stays committed
			return ctx.Err()
		}
		return nil
	})
	c1, err := consumer.New(cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c1)
	waitFor(t, "49 records finished around the pinned one", 20*time.Second, func() bool { return c1.Stats().Succeeded == 49 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		again []int64
	)
	second := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		mu.Lock()
		defer mu.Unlock()
		again = append(again, r.Offset)
		return nil
	})
	c2, err := consumer.New(cfg, second)
	if err != nil {
		t.Fatal(err)
	}
	stop = run(c2)
	waitFor(t, "the second owner caught up", 20*time.Second, func() bool {
		p, err := offsets.Read(broker.Addrs(), "events", "resume")
		return err == nil && p.Committed[0] == 50
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(again) != 1 || again[0] != 0 || c2.Stats().Resumed != 49 {
		t.Fatalf("the second owner ran offsets %v and resumed %d; want only offset 0 run, 49 resumed", again, c2.Stats().Resumed)
	}
}

// Metrics go to the registry given; a second consumer on the same registry
// is refused at Run with a clear error instead of a panic while the first
// runs, and runs once the first has returned (its metrics unregistered).
func TestMetricsGoToTheRegistryGiven(t *testing.T) {
	broker, err := embedded.Start(1, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	reg := prometheus.NewRegistry()
	cfg := consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "metrics"}
	h := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })
	c, err := consumer.New(cfg, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	produce(t, broker.Addrs(), "events", []string{"k"}, []string{"v"})
	waitFor(t, "the record handled", 20*time.Second, func() bool { return c.Stats().Succeeded == 1 })
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"patchflow_records_total", "patchflow_handler_duration_seconds", "patchflow_partition_committed_offset"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("registry lacks %s: %v", want, names)
		}
	}
	again, err := consumer.New(cfg, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := again.Run(ctx); err == nil || !strings.Contains(err.Error(), "one consumer at a time per registry") {
		t.Fatalf("a second consumer on the registry: %v, want a clear error", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if families, _ := reg.Gather(); len(families) != 0 {
		t.Errorf("%d metric families left in the registry after Run returned", len(families))
	}
	third, err := consumer.New(cfg, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	stop = run(third)
	produce(t, broker.Addrs(), "events", []string{"k"}, []string{"v2"})
	waitFor(t, "the next consumer on the registry handles a record", 20*time.Second, func() bool { return third.Stats().Succeeded == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A handler that reports its dependency's calls, under each record's
// context, lets the retry rule tell its own failures from a shared outage:
// with the dependency serving the other records, a record failing in it is
// dead-lettered after MaxAttempts; its calls are also the dependency
// histogram.
func TestReportedDependencyBoundsARecordsOwnFailures(t *testing.T) {
	broker, err := embedded.Start(1, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	reg := prometheus.NewRegistry()
	h := &reportingHandler{}
	// Other records keep coming (one every 10 ms), each calling svc and
	// served: the evidence that the bad record's failures are its own.
	stopCalls := make(chan struct{})
	defer close(stopCalls)
	cfg := consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "deps", MaxAttempts: 2,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Ordering: "unordered"}
	c, err := consumer.New(cfg, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		pcfg := sarama.NewConfig()
		pcfg.Producer.Return.Successes = true
		p, err := sarama.NewSyncProducer(broker.Addrs(), pcfg)
		if err != nil {
			t.Error(err)
			return
		}
		defer p.Close()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopCalls:
				return
			case <-tick.C:
				_, _, _ = p.SendMessage(&sarama.ProducerMessage{Topic: "events", Key: sarama.StringEncoder(fmt.Sprint("good-", i)), Value: sarama.StringEncoder("good")})
			}
		}
	}()
	stop := run(c)
	defer func() { _ = stop() }()
	produce(t, broker.Addrs(), "events", []string{"k"}, []string{"bad"})
	waitFor(t, "the bad record dead-lettered", 30*time.Second, func() bool { return c.Stats().DeadLettered == 1 })
	if got := c.Stats().DeadLetteredByReason["transient"]; got != 1 {
		t.Errorf("dead-lettered by reason %v: want the transient own failure", c.Stats().DeadLetteredByReason)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var calls uint64
	for _, f := range families {
		if f.GetName() == "patchflow_dependency_duration_seconds" {
			for _, m := range f.GetMetric() {
				calls += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if calls < 3 {
		t.Errorf("the dependency histogram counted %d calls, want the record's 2 and the others'", calls)
	}
}

// reportingHandler calls a dependency "svc" per record; svc fails the
// record whose value is "bad" and serves the others.
type reportingHandler struct {
	mu     sync.Mutex
	report func(context.Context, string, time.Duration, error)
}

func (h *reportingHandler) ReportDependenciesTo(report func(context.Context, string, time.Duration, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.report = report
}

// call reports one call to svc, once the consumer has wired the report.
func (h *reportingHandler) call(ctx context.Context, err error) {
	h.mu.Lock()
	report := h.report
	h.mu.Unlock()
	if report != nil {
		report(ctx, "svc", time.Millisecond, err)
	}
}

func (h *reportingHandler) Handle(ctx context.Context, r *consumer.Record) error {
	var err error
	if string(r.Value) == "bad" {
		err = consumer.Transient(errors.New("svc: 503"))
	}
	h.call(ctx, err)
	return consumer.FailedIn("svc", err)
}
