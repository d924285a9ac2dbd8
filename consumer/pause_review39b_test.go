package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Pause while the partition's next record waits for a credit (its one
// credit held by a record running): once that record finishes, the next
// one must wait for Resume, not be admitted and handled. The feed loop
// checks the pause only before the credit wait, never after it.
func TestReview39bPauseWhileStarvedAdmitsTheNextRecord(t *testing.T) {
	broker, err := embedded.Start(1, "starved")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "starved", []string{"a", "b", "c"}, []string{"1", "2", "3"})
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	var pausedAt time.Time
	var afterPause []string
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		mu.Lock()
		handled = append(handled, string(r.Value))
		if !pausedAt.IsZero() {
			afterPause = append(afterPause, string(r.Value))
		}
		mu.Unlock()
		if string(r.Value) == "1" {
			<-release
		}
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "starved", Group: "starved",
		InFlightPerPartition: 1}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(handled) }
	waitFor(t, "the first record running", 20*time.Second, func() bool { return count() == 1 })
	time.Sleep(300 * time.Millisecond) // the bridge now holds "2", waiting for the credit "1" holds
	mu.Lock()
	pausedAt = time.Now()
	mu.Unlock()
	c.Pause()
	close(release)
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	got := append([]string(nil), afterPause...)
	mu.Unlock()
	parts := c.Partitions()
	c.Resume()
	waitFor(t, "all handled after the resume", 20*time.Second, func() bool { return count() == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		paused := false
		for _, p := range parts {
			paused = paused || p.Paused
		}
		t.Fatalf("records %v handled after Pause() returned (the topic paused; partition reads as paused: %v)", got, paused)
	}
}

// Pause, then shut down: the drain ends within DrainTimeout, and
// everything handled is committed.
func TestReview39bPausedShutdownDrainsInTime(t *testing.T) {
	broker, err := embedded.Start(2, "pausedstop")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "pausedstop", []string{"a", "b", "c", "d"}, []string{"1", "2", "3", "4"})
	var mu sync.Mutex
	n := 0
	h := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { mu.Lock(); n++; mu.Unlock(); return nil })
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "pausedstop", Group: "pausedstop", DrainTimeout: 2 * time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	c.Pause("pausedstop")
	stop := run(c)
	waitFor(t, "both partitions paused", 20*time.Second, func() bool {
		k := 0
		for _, p := range c.Partitions() {
			if p.Paused {
				k++
			}
		}
		return k == 2
	})
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Run took %v to return while paused (DrainTimeout 2 s)", d)
	}
	p, err := offsets.Read(broker.Addrs(), "pausedstop", "pausedstop")
	if err != nil {
		t.Fatal(err)
	}
	for part := range p.Ends {
		if p.Committed[part] > 0 {
			t.Errorf("partition %d committed %d though nothing was handled", part, p.Committed[part])
		}
	}
	if n != 0 {
		t.Errorf("%d handled while paused", n)
	}
}
