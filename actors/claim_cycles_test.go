package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// liveProcesses counts the processes the actor system has registered.
func liveProcesses(system *actor.ActorSystem) int {
	n := 0
	for _, m := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// A claim leaves no actor behind once it ends: a listener claims
// partitions at every rebalance for as long as it runs, so anything a
// claim leaves registered grows without bound. Each partition actor used
// to bring a supervisor strategy of its own, and protoactor keeps one
// guardian actor per strategy for the life of the system: one more
// process, and its memory, per claim (the 30-minute nemesis's steady
// listener grew from 42 to 60 MB).
func TestClaimsLeaveNoActorBehind(t *testing.T) {
	system := newTestSystem(t)
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: system, Settings: testSettings(ordering.ByKey),
		Handler:     actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	claimOnce := func(i int) {
		partition := int32(i % 8)
		marker := &recordingMarker{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sess := &fakeSession{ctx: ctx, marker: marker}
		if err := b.Setup(sess); err != nil {
			t.Fatal(err)
		}
		c := &fakeClaim{partition: partition, msgs: make(chan *sarama.ConsumerMessage, 5), errs: make(chan *sarama.ConsumerError)}
		for j := range 5 {
			c.msgs <- &sarama.ConsumerMessage{Topic: "events", Partition: partition, Offset: int64(j), Key: []byte{byte(j)}}
		}
		done := make(chan struct{})
		go func() { _ = b.ConsumeClaim(sess, c); close(done) }()
		waitFor(t, "the claim's 5 records marked", func() bool { return marker.get(partition) == 5 })
		c.close()
		cancel()
		<-done
		if err := b.Cleanup(sess); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		claimOnce(i)
	}
	before := liveProcesses(system)
	for i := range 100 {
		claimOnce(i)
	}
	// The partition actors stop as their claims end; give the last one
	// time to.
	deadline := time.Now().Add(5 * time.Second)
	for liveProcesses(system) > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if after := liveProcesses(system); after != before {
		t.Fatalf("%d processes registered after 20 claims, %d after 100 more", before, after)
	}
}
