package actors_test

// What a sample's InFlight counts: the handler calls running, not the
// credits held.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// oneKeyClaim is newFakeClaim with every record under the same key.
func oneKeyClaim(t *testing.T, partition int32, n int) *fakeClaim {
	c := &fakeClaim{partition: partition, msgs: make(chan *sarama.ConsumerMessage, n), errs: make(chan *sarama.ConsumerError)}
	for i := 0; i < n; i++ {
		c.msgs <- &sarama.ConsumerMessage{Topic: "events", Partition: partition, Offset: int64(i), Key: []byte{'k', byte(partition)}}
	}
	t.Cleanup(c.close)
	return c
}

// The default ordering (ByKey) with a hot key per partition: the gate runs
// one record per partition, the others wait behind it holding their process
// credit. The app-limited rule stops the limit growing: the downstream sees
// 8 calls, whatever the credits say. While a sample's InFlight counted
// credits the windows were never app-limited, and the limit climbed to the
// ceiling with the downstream's latency at its baseline; when the keys
// spread out again, that many records would reach the downstream at once.
func TestGateHeldRecordsDoNotRaiseTheLimit(t *testing.T) {
	s := testSettings(ordering.ByKey)
	s.InFlightTotal = 1024
	var running, peak atomic.Int64
	h := actors.HandlerFunc(func(context.Context, *messages.Record) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		return nil
	})
	b := newTestBridge(t, s, h)
	before := b.Concurrency()
	sess := &fakeSession{ctx: context.Background(), marker: &recordingMarker{}}
	const partitions = 8
	var claims []*fakeClaim
	var wg sync.WaitGroup
	for p := int32(0); p < partitions; p++ {
		c := oneKeyClaim(t, p, 5000)
		claims = append(claims, c)
		wg.Go(func() { _ = b.ConsumeClaim(sess, c) })
	}
	highest := before.Limit
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if c := b.Concurrency(); !c.Probing {
			highest = max(highest, c.Limit)
		}
	}
	after := b.Concurrency()
	held := b.Credits().Held
	for _, c := range claims {
		c.close()
	}
	wg.Wait()
	checkCredits(t, b)
	t.Logf("limit %d -> highest %d (now %+v); handler calls in flight at most %d; credits held at the end %d", before.Limit, highest, after, peak.Load(), held)
	if highest > max(before.Limit, 4*int(peak.Load())) {
		t.Fatalf("with at most %d handler calls in flight (the gate holding the rest), the limit rose from %d to %d", peak.Load(), before.Limit, highest)
	}
}
