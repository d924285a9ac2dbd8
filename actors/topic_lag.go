package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// TopicLag is the group's position on one topic, every partition of the
// topic counted, whether a member of the group holds it or not. The
// partition rows (PartitionState) cover only the claims of this process: a
// partition added to the topic and not yet claimed by anyone, or left
// unclaimed because the group has no member able to take it, shows here.
type TopicLag struct {
	Topic string
	// Partitions is the topic's partition count in the cluster's metadata
	// as read now.
	Partitions int
	// Unclaimed counts the partitions no member of the group holds.
	Unclaimed int
	// Lag is the records past the group's committed offset, summed over
	// every partition (one never committed counts from its oldest
	// record); UnclaimedLag the part of it in unclaimed partitions.
	Lag, UnclaimedLag int64
}

// TopicLagReader reads the group's TopicLag for each topic, in order.
type TopicLagReader func(ctx context.Context) ([]TopicLag, error)

// topicLagTimeout bounds one read when ctx does not.
const topicLagTimeout = 10 * time.Second

// NewTopicLagReader reads topics' lag for group through client: fresh
// metadata for the partition counts, the group's description for what its
// members hold, its committed offsets, and each partition's newest (and,
// where nothing is committed, oldest) offset. It is a few requests per
// partition: read it every so often (the consumer does every
// MetadataRefresh), not per scrape.
func NewTopicLagReader(client sarama.Client, group string, topics []string) TopicLagReader {
	return func(ctx context.Context) ([]TopicLag, error) {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, topicLagTimeout)
			defer cancel()
		}
		var out []TopicLag
		err := withinContext(ctx, func() error {
			var err error
			out, err = readTopicLag(client, group, topics)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("lag of group %s: %w", group, err)
		}
		return out, nil
	}
}

func readTopicLag(client sarama.Client, group string, topics []string) ([]TopicLag, error) {
	if err := client.RefreshMetadata(topics...); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	// The admin wraps the client; closing it would close the client, which
	// is not ours.
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, err
	}
	claimed, err := groupClaims(admin, group)
	if err != nil {
		return nil, err
	}
	parts := map[string][]int32{}
	for _, t := range topics {
		ps, err := client.Partitions(t)
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", t, err)
		}
		parts[t] = ps
	}
	committed, err := admin.ListConsumerGroupOffsets(group, parts)
	if err != nil {
		return nil, fmt.Errorf("committed offsets: %w", err)
	}
	if committed.Err != sarama.ErrNoError {
		return nil, fmt.Errorf("committed offsets: %w", committed.Err)
	}
	out := make([]TopicLag, 0, len(topics))
	for _, t := range topics {
		ends := map[int32]partitionEnds{}
		for _, p := range parts[t] {
			var e partitionEnds
			if e.newest, err = client.GetOffset(t, p, sarama.OffsetNewest); err != nil {
				return nil, fmt.Errorf("newest offset of %s/%d: %w", t, p, err)
			}
			e.committed = -1
			if b := committed.GetBlock(t, p); b != nil && b.Err == sarama.ErrNoError {
				e.committed = b.Offset
			}
			if e.committed < 0 {
				if e.oldest, err = client.GetOffset(t, p, sarama.OffsetOldest); err != nil {
					return nil, fmt.Errorf("oldest offset of %s/%d: %w", t, p, err)
				}
			}
			ends[p] = e
		}
		out = append(out, topicLag(t, ends, claimed[t]))
	}
	return out, nil
}

// groupClaims is what the group's members hold now, by topic.
func groupClaims(admin sarama.ClusterAdmin, group string) (map[string]map[int32]bool, error) {
	desc, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return nil, fmt.Errorf("describe the group: %w", err)
	}
	out := map[string]map[int32]bool{}
	for _, g := range desc {
		if g.Err != sarama.ErrNoError {
			return nil, fmt.Errorf("describe the group: %w", g.Err)
		}
		for _, m := range g.Members {
			a, err := m.GetMemberAssignment()
			if err != nil {
				return nil, fmt.Errorf("assignment of member %s: %w", m.MemberId, err)
			}
			if a == nil {
				continue
			}
			for t, ps := range a.Topics {
				if out[t] == nil {
					out[t] = map[int32]bool{}
				}
				for _, p := range ps {
					out[t][p] = true
				}
			}
		}
	}
	return out, nil
}

// partitionEnds are what a partition's lag is made of: the next offset to
// be written, the group's committed offset (-1: none) and, when none, the
// oldest offset, where the group would start.
type partitionEnds struct {
	newest, committed, oldest int64
}

// topicLag sums one topic's partitions; claimed are those a member holds.
func topicLag(topic string, ends map[int32]partitionEnds, claimed map[int32]bool) TopicLag {
	l := TopicLag{Topic: topic, Partitions: len(ends)}
	for p, e := range ends {
		from := e.committed
		if from < 0 {
			from = e.oldest
		}
		lag := max(e.newest-from, 0)
		l.Lag += lag
		if !claimed[p] {
			l.Unclaimed++
			l.UnclaimedLag += lag
		}
	}
	return l
}
