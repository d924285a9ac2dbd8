package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/actors"
)

// While a second member joins (cooperative-sticky, the default assignor),
// the first keeps the partitions it keeps; only the two that move to the
// second are between owners for a moment (revoked in the first round,
// assigned in the second), and the lag read counts only them as held by no
// member, never the four, and none once the group settles.
func TestTopicLagCountsWhatMembersHoldThroughARebalance(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "reb"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := HandlerFunc(func(context.Context, *Record) error { return nil })
	cfg := testConfig(c.ListenAddrs(), "3.6.0", "reb", "reb")
	a := start(t, cfg, h)
	defer a.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for len(a.Bridge.Partitions()) != 4 {
		if time.Now().After(deadline) {
			t.Fatal("not claimed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	scfg := sarama.NewConfig()
	scfg.Version = sarama.V3_6_0_0
	client, err := sarama.NewClient(c.ListenAddrs(), scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	read := actors.NewTopicLagReader(client, "reb", []string{"reb"})
	var stop atomic.Bool
	type sample struct {
		unclaimed, heldByA int
		at                 time.Duration
	}
	t0 := time.Now()
	samples := make(chan sample, 10000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			before := len(a.Bridge.Partitions())
			lags, err := read(context.Background())
			after := len(a.Bridge.Partitions())
			if err == nil && len(lags) == 1 {
				samples <- sample{lags[0].Unclaimed, min(before, after), time.Since(t0)}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	b := start(t, cfg, h)
	defer b.Stop()
	deadline = time.Now().Add(30 * time.Second)
	for len(b.Bridge.Partitions()) == 0 || len(a.Bridge.Partitions())+len(b.Bridge.Partitions()) != 4 {
		if time.Now().After(deadline) {
			t.Fatal("never split")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("split at %v", time.Since(t0))
	time.Sleep(2 * time.Second) // reads after the split, while the group settles
	stop.Store(true)
	<-done
	close(samples)
	var n, bad int
	var worst, last sample
	for s := range samples {
		n++
		if testing.Verbose() && n%8 == 0 {
			t.Logf("%v unclaimed=%d heldByA=%d", s.at.Round(time.Millisecond), s.unclaimed, s.heldByA)
		}
		if s.unclaimed > 2 {
			bad++
			worst = s
		}
		last = s
	}
	t.Logf("%d reads during the join", n)
	if bad > 0 {
		t.Fatalf("%d reads said %d of 4 partitions were held by no member (this member held %d); only the 2 that move may be", bad, worst.unclaimed, worst.heldByA)
	}
	if last.unclaimed != 0 {
		t.Fatalf("the last read, 2 s after the split, said %d partitions were held by no member", last.unclaimed)
	}
}
