package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Review of 3c4ecda: the commit metadata and resume are per partition of
// each topic. Two topics, same partition number, different pinned offsets:
// the second owner runs exactly each topic's unfinished record.
func TestReview39ResumePerTopic(t *testing.T) {
	broker, err := embedded.Start(1, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	keys, values := make([]string, 50), make([]string, 50)
	for i := range values {
		keys[i], values[i] = fmt.Sprint("k", i), fmt.Sprint(i)
	}
	produce(t, broker.Addrs(), "a", keys, values)
	produce(t, broker.Addrs(), "b", keys, values)
	pinned := map[string]int64{"a": 0, "b": 7}
	cfg := consumer.Config{Brokers: broker.Addrs(), Topics: []string{"a", "b"}, Group: "resume2", DrainTimeout: 500 * time.Millisecond,
		CommitInterval: 20 * time.Millisecond, Concurrency: consumer.ConcurrencyFixed}
	c1, err := consumer.New(cfg, consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if r.Offset == pinned[r.Topic] {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c1)
	waitFor(t, "98 records finished", 20*time.Second, func() bool { return c1.Stats().Succeeded == 98 })
	time.Sleep(200 * time.Millisecond) // a commit or two
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var again []string
	c2, err := consumer.New(cfg, consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		mu.Lock()
		defer mu.Unlock()
		again = append(again, fmt.Sprint(r.Topic, "/", r.Offset))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop = run(c2)
	waitFor(t, "caught up", 20*time.Second, func() bool {
		pa, e1 := offsets.Read(broker.Addrs(), "a", "resume2")
		pb, e2 := offsets.Read(broker.Addrs(), "b", "resume2")
		return e1 == nil && e2 == nil && pa.Committed[0] == 50 && pb.Committed[0] == 50
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(again)
	if !slices.Equal(again, []string{"a/0", "b/7"}) || c2.Stats().Resumed != 91 {
		t.Fatalf("second owner ran %v, resumed %d; want [a/0 b/7], 91 (49 above a's pin, 42 above b's)", again, c2.Stats().Resumed)
	}
}
