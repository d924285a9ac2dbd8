package actors_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/actors"
)

// The fence asks the coordinator through a client of its own (the
// listener's probe client), which the consumer group never refreshes. Once
// the group's coordinator moves (a broker restart, the __consumer_offsets
// partition's leader changing) the cached one answers NOT_COORDINATOR: the
// check refreshes the coordinator and asks again, or every dead letter of a
// partition the member still owns was blocked for ever.
func TestTheFenceFollowsAMovedCoordinator(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "events"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	k := actors.KafkaSettings{Brokers: cluster.ListenAddrs(), Topic: "events", Group: "fenced", Version: sarama.V3_6_0_0,
		Assignor: "cooperative-sticky", SessionTimeout: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond}
	cfg, err := actors.NewConsumerConfig(k, actors.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	cg, err := sarama.NewConsumerGroup(k.Brokers, k.Group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h := sessionSeen{sessions: make(chan sarama.ConsumerGroupSession, 16)}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_ = cg.Consume(ctx, []string{k.Topic}, h)
		}
	}()
	defer func() { cancel(); <-done; _ = cg.Close() }()
	var sess sarama.ConsumerGroupSession
	select {
	case sess = <-h.sessions:
	case <-time.After(10 * time.Second):
		t.Fatal("no session within 10s")
	}
	probe, err := sarama.NewClient(k.Brokers, cfg) // the listener's probe client
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	check := actors.NewMembershipCheck(probe, k.Group)
	if err := check(context.Background(), sess.GenerationID(), sess.MemberID(), k.Topic, 0); err != nil {
		t.Fatalf("before the move: %v", err)
	}
	// The session lease asks the same coordinator for the group's
	// description: yes for the member, no for one the group does not list.
	lease := actors.NewLeaseCheck(probe, k.Group)
	if err := lease(context.Background(), sess.GenerationID(), sess.MemberID()); err != nil {
		t.Fatalf("lease of the current member: %v", err)
	}
	if err := lease(context.Background(), sess.GenerationID(), "stranger"); !errors.Is(err, actors.ErrNotListed) {
		t.Fatalf("lease of an unknown member: %v, want %v", err, actors.ErrNotListed)
	}
	was := cluster.CoordinatorFor(k.Group)
	for i := 0; i < 100 && cluster.CoordinatorFor(k.Group) == was; i++ {
		cluster.RehashCoordinators()
	}
	if cluster.CoordinatorFor(k.Group) == was {
		t.Skip("the coordinator did not move")
	}
	// The member's own session follows the coordinator (its client refreshes);
	// the fence must too, within a few seconds.
	var last error
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case sess = <-h.sessions:
		default:
		}
		// The lease asks first, so it meets the stale coordinator itself
		// (the fence's refresh would otherwise do it for both).
		if last = lease(context.Background(), sess.GenerationID(), sess.MemberID()); last == nil {
			if last = check(context.Background(), sess.GenerationID(), sess.MemberID(), k.Topic, 0); last == nil {
				return
			}
		}
	}
	t.Fatalf("the coordinator moved from node %d to %d; the member still owns %s/0, but the fence still answers: %v",
		was, cluster.CoordinatorFor(k.Group), k.Topic, last)
}
