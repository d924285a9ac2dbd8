package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// MembershipCheck reports whether member is in the consumer group at
// generation now: nil when it is, an error saying why not otherwise (the
// coordinator's answer, or no answer). The bridge calls it before each
// dead-letter write of a claim (Fence), so that a member thrown out of the
// group while it slept (a stopped VM woken past its session timeout, a
// zombie) writes no dead letter for a partition whose next owner decides.
type MembershipCheck func(ctx context.Context, generation int32, member string) error

// membershipTimeout bounds one check when ctx does not.
const membershipTimeout = 5 * time.Second

// NewMembershipCheck returns a MembershipCheck that sends one Heartbeat for
// member at generation to group's coordinator through client. A heartbeat is
// what the member's own session sends every Heartbeat.Interval: one more
// changes nothing in the group, and its answer is the coordinator's word on
// whether the member and its generation are still current
// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: thrown out; REBALANCE_IN_PROGRESS:
// its partitions may be moving, so not now either).
func NewMembershipCheck(client sarama.Client, group string) MembershipCheck {
	return func(ctx context.Context, generation int32, member string) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, membershipTimeout)
			defer cancel()
		}
		type answer struct {
			resp *sarama.HeartbeatResponse
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			coordinator, err := client.Coordinator(group)
			if err != nil {
				done <- answer{err: fmt.Errorf("coordinator of group %s: %w", group, err)}
				return
			}
			resp, err := coordinator.Heartbeat(&sarama.HeartbeatRequest{GroupId: group, GenerationId: generation, MemberId: member})
			done <- answer{resp, err}
		}()
		select {
		case a := <-done:
			if a.err != nil {
				return fmt.Errorf("membership of %s in group %s: %w", member, group, a.err)
			}
			if a.resp.Err != sarama.ErrNoError {
				return fmt.Errorf("member %s of group %s at generation %d: %w", member, group, generation, a.resp.Err)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("membership of %s in group %s: no answer: %w", member, group, ctx.Err())
		}
	}
}
