package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

// A record failing in svc while it holds back everything else (partition
// order, its neighbours behind it, no other caller of svc) leaves no call
// of svc served to compare with: svc's health check, named like the
// dependency, is the evidence. The record is dead-lettered and the
// neighbours it held then run.
func TestAHealthCheckNamedLikeTheDependencyEndsALoneRecordsRetries(t *testing.T) {
	broker, err := embedded.Start(1, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	h := &reportingHandler{}
	cfg := consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "alone", MaxAttempts: 2,
		BackoffMin: 300 * time.Millisecond, BackoffMax: 600 * time.Millisecond, Ordering: "partition"}
	c, err := consumer.New(cfg, h, consumer.WithHealthCheck("svc", time.Minute, func(context.Context) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() { _ = stop() }()
	// One good record first, so svc is known to the consumer by its calls.
	produce(t, broker.Addrs(), "events", []string{"k0", "k1", "k2", "k3"}, []string{"good", "bad", "good", "good"})
	waitFor(t, "the lone failing record dead-lettered and its neighbours handled", 30*time.Second, func() bool {
		s := c.Stats()
		return s.DeadLettered == 1 && s.Succeeded == 3
	})
	if got := c.Stats().DeadLetteredByReason["transient"]; got != 1 {
		t.Errorf("dead-lettered by reason %v: want the transient own failure", c.Stats().DeadLetteredByReason)
	}
}
