package actors_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// sessionSeen is a sarama handler that hands out its session and consumes
// nothing.
type sessionSeen struct {
	sessions chan sarama.ConsumerGroupSession
}

func (h sessionSeen) Setup(s sarama.ConsumerGroupSession) error {
	select {
	case h.sessions <- s:
	default:
	}
	return nil
}
func (sessionSeen) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (sessionSeen) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}

// The coordinator's word on a member: current at its live generation; not
// at an older one (a member thrown out while it slept knows only that), nor
// as a member it never had.
func TestMembershipCheckAsksTheCoordinator(t *testing.T) {
	_, k := newKfake(t, "events", "fenced", 1)
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
	h := sessionSeen{sessions: make(chan sarama.ConsumerGroupSession, 1)}
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
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	check := actors.NewMembershipCheck(client, k.Group)
	if err := check(context.Background(), sess.GenerationID(), sess.MemberID(), k.Topic, 0); err != nil {
		t.Fatalf("the live member at its generation, for its partition: %v", err)
	}
	if err := check(context.Background(), sess.GenerationID(), sess.MemberID(), k.Topic, 1); !errors.Is(err, actors.ErrNotAssigned) {
		t.Fatalf("the live member, for a partition not its own: %v, want ErrNotAssigned", err)
	}
	if err := check(context.Background(), sess.GenerationID(), sess.MemberID(), "another-topic", 0); !errors.Is(err, actors.ErrNotAssigned) {
		t.Fatalf("the live member, for another topic: %v, want ErrNotAssigned", err)
	}
	if err := check(context.Background(), sess.GenerationID()-1, sess.MemberID(), k.Topic, 0); !errors.Is(err, sarama.ErrIllegalGeneration) {
		t.Fatalf("an older generation: %v, want ILLEGAL_GENERATION", err)
	}
	if err := check(context.Background(), sess.GenerationID(), "a-member-long-gone", k.Topic, 0); !errors.Is(err, sarama.ErrUnknownMemberId) {
		t.Fatalf("an unknown member: %v, want UNKNOWN_MEMBER_ID", err)
	}
}

// A claim whose member is no longer current writes no dead letter: the
// write fails (retried), and the drain that ends the claim abandons the
// record; while the member is current the envelope names its generation
// and member.
func TestDeadLettersAreFencedByMembership(t *testing.T) {
	var current atomic.Bool
	var mu sync.Mutex
	var letters []*messages.DeadLetter
	s := testSettings(ordering.ByKey)
	system := newTestSystem(t)
	stats := &actors.Stats{}
	pa := actors.NewPartitionActor(actors.PartitionConfig{
		Topic: "events", Partition: 2, Generation: 7, Epoch: 1, Settings: s,
		Handler: actors.HandlerFunc(func(context.Context, *messages.Record) error {
			return messages.Permanent(errors.New("malformed"))
		}),
		DeadLetters: actors.DeadLetterFunc(func(_ context.Context, l *messages.DeadLetter) error {
			mu.Lock()
			defer mu.Unlock()
			letters = append(letters, l)
			return nil
		}),
		Member: func() (int32, string) { return 9, "member-a" },
		Fence: func(context.Context) error {
			if current.Load() {
				return nil
			}
			return fmt.Errorf("member member-a of group g at generation 9: %w", sarama.ErrIllegalGeneration)
		},
		Marker: &recordingMarker{}, Logger: slog.New(slog.DiscardHandler), Stats: stats,
	})
	pid := system.Root.Spawn(pa.Props())
	system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 2, Offset: 0, Value: []byte("{")}})
	waitFor(t, "the write fenced and retried", func() bool { return stats.Snapshot().DeadLetterWriteFailures >= 2 })
	mu.Lock()
	n := len(letters)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d dead letters written by a member no longer current", n)
	}
	current.Store(true)
	waitFor(t, "the dead letter written", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(letters) == 1
	})
	mu.Lock()
	l := letters[0]
	mu.Unlock()
	if l.GetGeneration() != 9 || l.GetMemberId() != "member-a" {
		t.Fatalf("envelope generation %d member %q, want 9 and member-a", l.GetGeneration(), l.GetMemberId())
	}
	_ = system.Root.StopFuture(pid).Wait()
}

// A record that fails for good while its partition drains is abandoned to
// the partition's next owner, not dead-lettered by the member giving it up.
func TestNoDeadLetterStartsWhileDraining(t *testing.T) {
	release := make(chan struct{})
	var written atomic.Int64
	s := testSettings(ordering.ByKey)
	system := newTestSystem(t)
	pa := actors.NewPartitionActor(actors.PartitionConfig{
		Topic: "events", Partition: 2, Epoch: 1, Settings: s,
		Handler: actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error {
			<-release // fails for good only once the drain began
			return messages.Permanent(errors.New("malformed"))
		}),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { written.Add(1); return nil }),
		Marker:      &recordingMarker{}, Logger: slog.New(slog.DiscardHandler), Stats: &actors.Stats{},
	})
	pid := system.Root.Spawn(pa.Props())
	system.Root.Send(pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: 2, Offset: 0}})
	waitFor(t, "the record running", func() bool { return pa.State().InFlight == 1 })
	fut := system.Root.RequestFuture(pid, &messages.Drain{}, 5*time.Second)
	waitFor(t, "the drain begun", func() bool { return actors.IsDraining(pa) })
	close(release) // the record fails for good only now
	res, err := fut.Result()
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(*messages.DrainResult); r.GetAbandoned() != 1 || written.Load() != 0 {
		t.Fatalf("drain abandoned %d, dead letters written %d; want the record abandoned and none written", r.GetAbandoned(), written.Load())
	}
}

// rejoiningSession is sarama's cooperative session as it rejoins after
// UNKNOWN_MEMBER_ID (sarama v1.61.1, consumer_group_cooperative.go:
// rejoinCooperative stores the new member id and generation, and only then
// reconcileAssignment revokes the claims the new assignment lacks).
type rejoiningSession struct {
	fakeSession
	gen    atomic.Int32
	member atomic.Pointer[string]
}

func (s *rejoiningSession) GenerationID() int32 { return s.gen.Load() }
func (s *rejoiningSession) MemberID() string    { return *s.member.Load() }

// A zombie (member a, generation 1, thrown out while it slept; partition 0
// now member b's at generation 2) wakes and rejoins under a new member id
// (a2, generation 3). In the moment between the client storing the new
// generation and revoking the claims the new assignment lacks, a record of
// partition 0 fails for good. The fence asks about the claim, not only the
// member: with partition 0 not in a2's assignment, no dead letter is
// written; with it kept (a cooperative rebalance that leaves a2 the
// partition), it is.
func TestAFenceAsksAboutTheClaimNotOnlyTheMember(t *testing.T) {
	for _, kept := range []bool{false, true} {
		t.Run(fmt.Sprintf("partition kept %v", kept), func(t *testing.T) {
			sess := &rejoiningSession{fakeSession: fakeSession{ctx: context.Background(), marker: &recordingMarker{}}}
			sess.gen.Store(1)
			a := "member-a"
			sess.member.Store(&a)
			var coordinatorGen atomic.Int32
			coordinatorGen.Store(2)
			check := func(_ context.Context, gen int32, member, topic string, partition int32) error {
				if gen != coordinatorGen.Load() {
					return fmt.Errorf("generation %d: %w", gen, sarama.ErrIllegalGeneration)
				}
				if member == "member-a2" && (partition == 1 || kept) {
					return nil
				}
				return fmt.Errorf("%s/%d: %w", topic, partition, actors.ErrNotAssigned)
			}
			var mu sync.Mutex
			var letters []*messages.DeadLetter
			fail := make(chan struct{})
			s := testSettings(ordering.ByKey)
			bridge, err := actors.NewBridge(actors.BridgeConfig{
				System: newTestSystem(t), Settings: s, Membership: check,
				Handler: actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
					<-fail
					return messages.Permanent(errors.New("malformed"))
				}),
				DeadLetters: actors.DeadLetterFunc(func(_ context.Context, l *messages.DeadLetter) error {
					mu.Lock()
					defer mu.Unlock()
					letters = append(letters, l)
					return nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(bridge.Close)
			claim := newFakeClaim(t, 0, 1)
			done := make(chan struct{})
			go func() { defer close(done); _ = bridge.ConsumeClaim(sess, claim) }()
			// The rejoin: the coordinator moves to generation 3 with a2
			// current; the session stores them; the claim is not revoked yet.
			a2 := "member-a2"
			coordinatorGen.Store(3)
			sess.member.Store(&a2)
			sess.gen.Store(3)
			close(fail)
			written := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(letters)
			}
			if kept {
				waitFor(t, "the dead letter of a partition kept", func() bool { return written() == 1 })
			} else {
				// The write is refused and retried until the claim ends:
				// wait for refusals, not for time.
				waitFor(t, "the write refused twice", func() bool { return bridge.Stats().Snapshot().DeadLetterWriteFailures >= 2 })
			}
			claim.close()
			<-done
			if n := written(); n != map[bool]int{false: 0, true: 1}[kept] {
				t.Fatalf("%d dead letters for partition 0 (kept %v)", n, kept)
			}
		})
	}
}
