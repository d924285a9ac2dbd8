package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
)

// MembershipCheck reports whether member is in the consumer group at
// generation now and topic/partition is in its assignment: nil when it is,
// an error saying why not otherwise (the coordinator's answer, or no
// answer). The bridge calls it before each dead-letter write of a claim
// (Fence), so that a member thrown out of the group while it slept (a
// stopped VM woken past its session timeout, a zombie) writes no dead
// letter for a partition whose next owner decides; nor does one that
// rejoined under a new member id whose assignment lacks the partition (in
// the moment between the client storing its new generation and revoking
// the claim).
type MembershipCheck func(ctx context.Context, generation int32, member, topic string, partition int32) error

// membershipTimeout bounds one check when ctx does not.
const membershipTimeout = 5 * time.Second

// ErrNotAssigned is a MembershipCheck's answer for a member that is
// current but whose assignment lacks the partition.
var ErrNotAssigned = errors.New("partition not in the member's assignment")

// NewMembershipCheck returns a MembershipCheck that asks group's coordinator
// through client, with two requests. A Heartbeat for member at generation:
// it is what the member's own session sends every Heartbeat.Interval, one
// more changes nothing in the group, and its answer is the coordinator's
// word on whether the member and its generation are still current
// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: thrown out; REBALANCE_IN_PROGRESS:
// its partitions may be moving, so not now either). Then DescribeGroups:
// the group must be stable and the member's assignment must hold the
// partition (a cooperative rebalance may keep a claim across generations,
// or leave it to another member).
func NewMembershipCheck(client sarama.Client, group string) MembershipCheck {
	return func(ctx context.Context, generation int32, member, topic string, partition int32) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, membershipTimeout)
			defer cancel()
		}
		err := withinContext(ctx, func() error {
			err := askCoordinator(client, group, generation, member, topic, partition)
			if errors.Is(err, errCoordinatorMoved) {
				// The client caches the coordinator; nothing else refreshes
				// it for this client. Ask Kafka where it is now, once.
				if rerr := client.RefreshCoordinator(group); rerr == nil {
					err = askCoordinator(client, group, generation, member, topic, partition)
				}
			}
			return err
		})
		if ctx.Err() != nil && err != nil {
			return fmt.Errorf("membership of %s in group %s: %w", member, group, err)
		}
		return err
	}
}

// errCoordinatorMoved marks an answer that says the cached coordinator is
// not the group's any more, or did not answer.
var errCoordinatorMoved = errors.New("the coordinator moved or did not answer")

// movedOr wraps err with errCoordinatorMoved when it says so.
func movedOr(err error) error {
	if errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) {
		return fmt.Errorf("%w: %w", errCoordinatorMoved, err)
	}
	return err
}

func askCoordinator(client sarama.Client, group string, generation int32, member, topic string, partition int32) error {
	if err := heartbeat(client, group, generation, member); err != nil {
		return err
	}
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: coordinator: %w", member, group, err)
	}
	desc, err := coordinator.DescribeGroups(&sarama.DescribeGroupsRequest{Groups: []string{group}})
	if err != nil {
		return fmt.Errorf("assignment of %s in group %s: %w: %w", member, group, errCoordinatorMoved, err)
	}
	for _, g := range desc.Groups {
		if g.GroupId != group {
			continue
		}
		if g.Err != sarama.ErrNoError {
			return movedOr(fmt.Errorf("assignment of %s in group %s: %w", member, group, g.Err))
		}
		if g.State != "Stable" {
			return fmt.Errorf("assignment of %s in group %s: the group is %s: %w", member, group, g.State, sarama.ErrRebalanceInProgress)
		}
		m := g.Members[member]
		if m == nil {
			return fmt.Errorf("member %s of group %s: not in its description: %w", member, group, sarama.ErrUnknownMemberId)
		}
		a, err := m.GetMemberAssignment()
		if err != nil {
			return fmt.Errorf("assignment of %s in group %s: %w", member, group, err)
		}
		if a != nil && slices.Contains(a.Topics[topic], partition) {
			return nil
		}
		return fmt.Errorf("%s/%d for member %s of group %s at generation %d: %w", topic, partition, member, group, generation, ErrNotAssigned)
	}
	return fmt.Errorf("assignment of %s in group %s: the coordinator did not describe the group", member, group)
}

// heartbeat sends group's coordinator a heartbeat of member at generation.
func heartbeat(client sarama.Client, group string, generation int32, member string) error {
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: coordinator: %w", member, group, err)
	}
	hb, err := coordinator.Heartbeat(&sarama.HeartbeatRequest{GroupId: group, GenerationId: generation, MemberId: member})
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: %w: %w", member, group, errCoordinatorMoved, err)
	}
	if hb.Err != sarama.ErrNoError {
		return movedOr(fmt.Errorf("member %s of group %s at generation %d: %w", member, group, generation, hb.Err))
	}
	return nil
}
