package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors/ledger"
)

// CommittedReader returns the group's committed offset of a partition and
// the metadata committed with it; offset is negative when there is none. It
// returns by ctx's deadline.
type CommittedReader func(ctx context.Context, topic string, partition int32) (offset int64, metadata string, err error)

// resumeReadTimeout bounds the read of the committed metadata as a claim
// starts; past it the claim starts without it (and replays).
const resumeReadTimeout = 5 * time.Second

// NewCommittedReader returns a CommittedReader that asks the group's
// coordinator through client (one OffsetFetch, once more after refreshing
// the coordinator if the first fails).
func NewCommittedReader(client sarama.Client, group string) CommittedReader {
	version := client.Config().Version
	fetch := func(topic string, partition int32) (int64, string, error) {
		coordinator, err := client.Coordinator(group)
		if err != nil {
			return 0, "", fmt.Errorf("coordinator of group %q: %w", group, err)
		}
		resp, err := coordinator.FetchOffset(sarama.NewOffsetFetchRequest(version, group, map[string][]int32{topic: {partition}}))
		if err != nil {
			return 0, "", err
		}
		if resp.Err != sarama.ErrNoError {
			return 0, "", resp.Err
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			return 0, "", errors.New("no answer for the partition")
		}
		if block.Err != sarama.ErrNoError {
			return 0, "", block.Err
		}
		return block.Offset, block.Metadata, nil
	}
	return func(ctx context.Context, topic string, partition int32) (int64, string, error) {
		type answer struct {
			offset int64
			meta   string
			err    error
		}
		done := make(chan answer, 1)
		go func() {
			off, meta, err := fetch(topic, partition)
			if err != nil && ctx.Err() == nil {
				_ = client.RefreshCoordinator(group)
				off, meta, err = fetch(topic, partition)
			}
			done <- answer{off, meta, err}
		}()
		select {
		case a := <-done:
			return a.offset, a.meta, a.err
		case <-ctx.Done():
			return 0, "", ctx.Err()
		}
	}
}

// resumeOf decides whether the committed metadata may skip records of a
// claim that began at initial. It may only when the metadata is ours,
// intact, and speaks of the very commit the claim began at: its base is the
// committed offset, and sarama started the claim there (not at the oldest
// offset after the committed one fell out of range, say). Otherwise it
// returns nil and why; the claim then replays everything from where it
// began, which is safe. why is empty when there is simply no metadata.
func resumeOf(initial, committed int64, metadata string) (resume *ledger.Resume, why string) {
	if metadata == "" {
		return nil, ""
	}
	r, err := ledger.DecodeMetadata(metadata)
	switch {
	case errors.Is(err, ledger.ErrForeignMetadata):
		return nil, "the commit metadata is not in a format of this listener (another client, or another version, committed it)"
	case err != nil:
		return nil, err.Error()
	case r.Base != committed:
		return nil, fmt.Sprintf("the commit metadata speaks of offset %d, not of the committed offset %d (another client committed without it)", r.Base, committed)
	case initial != committed:
		return nil, fmt.Sprintf("the claim began at %d, not at the committed offset %d", initial, committed)
	}
	return &r, ""
}

// readResume reads the committed metadata of a claim about to start. A read
// that fails or takes too long leaves the claim without it, with a warning.
func (b *Bridge) readResume(ctx context.Context, claim sarama.ConsumerGroupClaim, log *slog.Logger) *ledger.Resume {
	if b.cfg.Committed == nil || claim.InitialOffset() < 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resumeReadTimeout)
	defer cancel()
	committed, meta, err := b.cfg.Committed(ctx, claim.Topic(), claim.Partition())
	if err != nil {
		log.Warn("could not read the commit metadata; replaying every record above the committed offset", "error", err)
		return nil
	}
	r, why := resumeOf(claim.InitialOffset(), committed, meta)
	if why != "" {
		log.Warn("commit metadata ignored; replaying every record above the committed offset", "why", why, "metadata_bytes", len(meta))
	}
	return r
}
