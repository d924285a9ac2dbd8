package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Pause stops one topic's admission while the other goes on, without a
// rebalance (no claim starts again), and Resume lets its records through;
// committed offsets follow.
func TestPauseStopsATopicWithoutARebalance(t *testing.T) {
	broker, err := embedded.Start(2, "fast", "held")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	for _, topic := range []string{"fast", "held"} {
		produce(t, broker.Addrs(), topic, []string{"a", "b", "c", "d", "e", "f"}, []string{"1", "2", "3", "4", "5", "6"})
	}
	var mu sync.Mutex
	handled := map[string]int{}
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[r.Topic]++
		return nil
	})
	reg := prometheus.NewRegistry()
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topics: []string{"fast", "held"}, Group: "pausing"}, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	c.Pause("held")
	stop := run(c)
	count := func(topic string) int { mu.Lock(); defer mu.Unlock(); return handled[topic] }
	waitFor(t, "the topic not paused handled", 20*time.Second, func() bool { return count("fast") == 6 })
	pausedParts := func() int {
		n := 0
		for _, p := range c.Partitions() {
			if p.Topic == "held" && p.Paused {
				n++
			}
		}
		return n
	}
	waitFor(t, "both partitions of the paused topic waiting, records in hand", 20*time.Second, func() bool { return pausedParts() == 2 })
	if n := count("held"); n != 0 {
		t.Fatalf("%d records of the paused topic handled", n)
	}
	if ok, why := c.Ready(); !ok {
		t.Errorf("not ready while paused: %s", why)
	}
	claims := claimsTotal(t, reg)
	c.Resume("held")
	waitFor(t, "the resumed topic handled", 20*time.Second, func() bool { return count("held") == 6 })
	waitFor(t, "the resumed topic committed to its end", 20*time.Second, func() bool {
		p, err := offsets.Read(broker.Addrs(), "held", "pausing")
		return err == nil && p.Committed[0] == p.Ends[0] && p.Committed[1] == p.Ends[1]
	})
	if got := claimsTotal(t, reg); got != claims || claims != 4 {
		t.Errorf("claims: %v before the resume, %v after; want 4 both (no rebalance)", claims, got)
	}
	if pausedParts() != 0 {
		t.Error("a partition still reads as paused after the resume")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func claimsTotal(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == "patchflow_claims_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
