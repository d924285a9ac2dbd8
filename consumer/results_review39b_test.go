package consumer_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/kfakecontrol"
	"github.com/patchflow/patchflow/proving/offsets"
)

// holdFirstProduceTo holds the first produce request that writes to topic
// until release is called (idempotent; call it before closing the broker);
// every other request passes.
func holdFirstProduceTo(broker *embedded.Broker, topic string) (held *atomic.Bool, release func()) {
	held = new(atomic.Bool)
	c := broker.Cluster()
	sleeper := kfakecontrol.New(c)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		for _, t := range pr.Topics {
			if t.Topic == topic && held.CompareAndSwap(false, true) {
				sleeper.For(time.Hour) // until release
			}
		}
		return nil, nil, false
	})
	return held, sleeper.Stop
}

// A results send that does not return (the broker slow to acknowledge)
// holds Run's return: produced.close waits for it, past DrainTimeout,
// for as long as sarama's timeouts and 10 retries take (minutes).
func TestReview39bResultsSendHoldsRunPastDrainTimeout(t *testing.T) {
	broker, err := embedded.Start(1, "rin", "rout")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "rin", []string{"k"}, []string{"1"})
	held, free := holdFirstProduceTo(broker, "rout")
	defer free()
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		r.Produce(consumer.Message{Topic: "rout", Key: r.Key, Value: r.Value})
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "rin", Group: "rheld", DrainTimeout: time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "the result's produce held at the broker", 20*time.Second, func() bool { return held.Load() })
	start := time.Now()
	cancel()
	select {
	case <-done:
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Run returned %v after its ctx ended (DrainTimeout 1 s)", d)
		}
	case <-time.After(8 * time.Second):
		free()
		err := <-done
		t.Fatalf("Run had not returned 8 s after its ctx ended (DrainTimeout 1 s): it waits for the results send (returned %v after the broker answered)", err)
	}
	// The send outlives Run by design and ends once the broker answers it:
	// let the broker answer before it closes, or the send retries against
	// a closed broker past the end of the tests.
	free()
	waitForNoGoroutine(t, "consumer.(*results).produce.func", 30*time.Second)
}

// Results to a topic that does not exist, for every record: an outage of
// "results", held (retried, nothing dead-lettered, nothing committed) and
// visible: Ready false past ReadyPinLimit, and the dependency failing.
func TestReview39bResultsToAMissingTopicHoldAndShow(t *testing.T) {
	broker, err := embedded.Start(1, "min")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "min", []string{"a", "b", "c"}, []string{"1", "2", "3"})
	var calls atomic.Int32
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		calls.Add(1)
		r.Produce(consumer.Message{Topic: "missing", Key: r.Key, Value: r.Value})
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "min", Group: "missing", MaxAttempts: 2,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, ReadyPinLimit: 2 * time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	time.Sleep(8 * time.Second)
	s := c.Stats()
	ready, why := c.Ready()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("after 8 s: %d calls, succeeded %d, dead-lettered %d, retried %d; ready %v: %s", calls.Load(), s.Succeeded, s.DeadLettered, s.Retried, ready, why)
	if s.DeadLettered != 0 || s.Succeeded != 0 {
		t.Errorf("%d dead-lettered, %d succeeded: want every record held", s.DeadLettered, s.Succeeded)
	}
	if ready {
		t.Error("Ready true while no record can finish")
	} else if !strings.Contains(why, "missing") && !strings.Contains(strings.ToLower(why), "unknown topic") {
		t.Errorf("the failure shown does not say which topic or why: %q", why)
	}
	buf := make([]byte, 1<<20)
	if st := string(buf[:runtime.Stack(buf, true)]); strings.Contains(st, "go-resiliency/breaker") {
		t.Errorf("a goroutine of the results producer (sarama's breaker timer) outlives Run")
		waitForNoGoroutine(t, "go-resiliency/breaker", 15*time.Second) // keep goleak quiet for the rest
	}
	p, err := offsets.Read(broker.Addrs(), "min", "missing")
	if err == nil && p.Committed[0] > 0 {
		t.Errorf("committed %d", p.Committed[0])
	}
}
