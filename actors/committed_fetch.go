package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/IBM/sarama"
)

// fetchCommittedAttempts and fetchCommittedBackoff bound fetchCommitted's
// asks while the group's coordinator moves (sarama's admin asks up to 6
// times, 100 ms apart, for the same errors).
const (
	fetchCommittedAttempts = 3
	fetchCommittedBackoff  = 100 * time.Millisecond
)

// fetchCommitted asks group's coordinator, through client, for the offsets
// the group committed on parts. An answer that the coordinator moved (or a
// connection that closed) is asked again after refreshing the coordinator,
// up to fetchCommittedAttempts times in all and never once ctx has ended;
// any other error, a timeout among them, ends it.
//
// It asks for stable offsets: a coordinator that has just taken the group
// over from a failed node answers a plain OffsetFetch from what its log had
// replicated when it took over, which can lie below commits the failed node
// had already acknowledged. On Kafka 4.1.1, killing the coordinator while
// one client committed every few milliseconds gave plain reads below an
// acknowledged commit just after each takeover, and stable reads never
// (`make failover-reads`; docs/reliability.md). A stable fetch waits for
// the takeover's pending state instead. Sarama's own claims read stable
// only under read_committed. Two costs: a broker whose OffsetFetch stops
// below version 7 (Kafka before 2.5) cannot carry the request, so it is
// asked again without it; and while another client's transaction holds
// offsets of the group, the answer is UNSTABLE_OFFSET_COMMIT, an error
// here (the claim then replays, the lag read keeps its last answer; the
// product's own transactions commit no offsets of its group).
func fetchCommitted(ctx context.Context, client sarama.Client, group string, parts map[string][]int32) (*sarama.OffsetFetchResponse, error) {
	ask := func() (*sarama.OffsetFetchResponse, error) {
		coordinator, err := client.Coordinator(group)
		if err != nil {
			return nil, fmt.Errorf("coordinator of group %q: %w", group, err)
		}
		req := sarama.NewOffsetFetchRequest(client.Config().Version, group, parts)
		req.RequireStable = req.Version >= 7
		resp, err := coordinator.FetchOffset(req)
		var encoding sarama.PacketEncodingError
		if req.RequireStable && errors.As(err, &encoding) {
			// The broker's versions cut the request below 7, which has no
			// room for the flag: ask as sarama's claims do there.
			req.RequireStable = false
			resp, err = coordinator.FetchOffset(req)
		}
		if err != nil {
			return nil, err
		}
		if gerr := resp.GroupError(); gerr != sarama.ErrNoError {
			return nil, gerr
		}
		return resp, nil
	}
	var resp *sarama.OffsetFetchResponse
	var err error
	for attempt := 1; ; attempt++ {
		if resp, err = ask(); err == nil || attempt == fetchCommittedAttempts || !coordinatorMoved(err) {
			return resp, err
		}
		if rerr := client.RefreshCoordinator(group); errors.Is(rerr, sarama.ErrClosedClient) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(fetchCommittedBackoff):
		}
	}
}

// coordinatorMoved reports whether err says the group's coordinator is
// elsewhere or not ready (sarama's admin retries the same ones).
func coordinatorMoved(err error) bool {
	return errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) ||
		errors.Is(err, sarama.ErrOffsetsLoadInProgress) || errors.Is(err, io.EOF)
}
