package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Every retry counts for its topic, judged or not: three records that fail
// once and then succeed are three retries of their topic, as of the total.
func TestRetriesAreCountedPerTopic(t *testing.T) {
	broker, err := embedded.Start(1, "flaky")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "flaky", []string{"a", "b", "c"}, []string{"1", "2", "3"})
	var mu sync.Mutex
	failed := map[string]bool{}
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if !failed[string(r.Value)] { // every record fails once, then succeeds
			failed[string(r.Value)] = true
			return consumer.Transient(errors.New("blip"))
		}
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "flaky", Group: "flaky"}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "committed to the end", 30*time.Second, func() bool {
		p, err := offsets.Read(broker.Addrs(), "flaky", "flaky")
		return err == nil && p.Committed[0] == 3
	})
	s := c.Stats()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, ts := range s.ByTopic {
		sum += ts.Retried
	}
	if s.Retried != 3 || sum != 3 {
		t.Fatalf("Stats.Retried %d, summed over topics %d (%+v); want 3 of each", s.Retried, sum, s.ByTopic)
	}
}
