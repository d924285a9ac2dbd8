package actors

import (
	"context"
	"errors"
	"fmt"

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

// TopicLagReader reads the group's TopicLag for each topic it can, in
// order; the error says which it could not and why (a topic deleted, a
// partition without a leader, an error for one partition), and the
// others' are read all the same.
type TopicLagReader func(ctx context.Context) ([]TopicLag, error)

// NewTopicLagReader reads topics' lag for group through client: fresh
// metadata for the partition counts, the group's description for what its
// members hold, its committed offsets, and each partition's newest (and,
// where nothing is committed, oldest) offset, one request per leader. Give
// it a client of its own: a request the brokers hold keeps its broker
// connection (sarama sends one request at a time on it), and the checks
// that keep the claims alive must not wait behind it. Each request is
// bounded by the client's Net timeouts; ctx is checked between them. Calls
// must not overlap.
//
// While the group rebalances its description lists no assignment, though
// with the cooperative assignor the members go on holding what they keep:
// a read then counts as claimed what the members held at the group's last
// stable state (nothing before one; nothing once the group is empty).
func NewTopicLagReader(client sarama.Client, group string, topics []string) TopicLagReader {
	var stable map[string]map[int32]bool
	return func(ctx context.Context) ([]TopicLag, error) {
		read, err := readTopicLag(ctx, client, group, topics, stable)
		if read.held != nil {
			stable = read.held
		}
		if err != nil {
			err = fmt.Errorf("lag of group %s: %w", group, err)
		}
		return read.lags, err
	}
}

type lagRead struct {
	lags []TopicLag
	held map[string]map[int32]bool // the claims the read counted; nil when the group was not read
}

func readTopicLag(ctx context.Context, client sarama.Client, group string, topics []string, stable map[string]map[int32]bool) (lagRead, error) {
	failed := map[string]error{}
	fail := func(topic string, err error) {
		if failed[topic] == nil {
			failed[topic] = err
		}
	}
	parts := map[string][]int32{}
	for _, t := range topics {
		if err := ctx.Err(); err != nil {
			return lagRead{}, err
		}
		if err := client.RefreshMetadata(t); err != nil {
			fail(t, fmt.Errorf("metadata: %w", err))
			continue
		}
		ps, err := client.Partitions(t)
		if err != nil {
			fail(t, fmt.Errorf("partitions: %w", err))
			continue
		}
		parts[t] = ps
	}
	// The admin wraps the client (made after the topics' metadata: it
	// refreshes the client's, which fails while it knows no topic); closing
	// it would close the client, which is not the admin's.
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return lagRead{}, errors.Join(err, lagErrors(topics, failed))
	}
	held, err := groupClaims(admin, group, stable)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return lagRead{}, fmt.Errorf("describe the group: %w", err)
	}
	var committed *sarama.OffsetFetchResponse
	if len(parts) > 0 {
		committed, err = fetchCommitted(ctx, client, group, parts)
		if errors.Is(err, sarama.ErrGroupIDNotFound) {
			// A group not created yet has committed nothing.
			committed, err = &sarama.OffsetFetchResponse{}, nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return lagRead{held: held}, fmt.Errorf("committed offsets: %w", err)
		}
	}
	ends := map[string]map[int32]partitionEnds{}
	var uncommitted, all []topicPartition
	for _, t := range topics {
		if parts[t] == nil {
			continue
		}
		ends[t] = map[int32]partitionEnds{}
		for _, p := range parts[t] {
			e := partitionEnds{committed: -1}
			if b := committed.GetBlock(t, p); b != nil {
				if b.Err != sarama.ErrNoError {
					fail(t, fmt.Errorf("committed offset of partition %d: %w", p, b.Err))
				}
				e.committed = b.Offset
			}
			ends[t][p] = e
			all = append(all, topicPartition{t, p})
			if e.committed < 0 {
				uncommitted = append(uncommitted, topicPartition{t, p})
			}
		}
	}
	newest := listOffsets(ctx, client, all, sarama.OffsetNewest, fail)
	oldest := listOffsets(ctx, client, uncommitted, sarama.OffsetOldest, fail)
	if err := ctx.Err(); err != nil {
		return lagRead{held: held}, err
	}
	out := lagRead{held: held}
	for _, t := range topics {
		if failed[t] != nil {
			continue
		}
		for p, e := range ends[t] {
			e.newest, e.oldest = newest[topicPartition{t, p}], oldest[topicPartition{t, p}]
			ends[t][p] = e
		}
		out.lags = append(out.lags, topicLag(t, ends[t], held[t]))
	}
	return out, lagErrors(topics, failed)
}

// lagErrors names each topic that failed, in the topics' order.
func lagErrors(topics []string, failed map[string]error) error {
	var errs []error
	for _, t := range topics {
		if err := failed[t]; err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

type topicPartition struct {
	topic     string
	partition int32
}

// listOffsets asks each partition's leader, once per leader, for the
// offset at when (sarama.OffsetNewest: the next to be written, the last
// stable one under read_committed; sarama.OffsetOldest). What it cannot
// read goes to fail, by topic; it stops asking once ctx ends.
func listOffsets(ctx context.Context, client sarama.Client, tps []topicPartition, when int64, fail func(string, error)) map[topicPartition]int64 {
	byLeader := map[int32][]topicPartition{}
	leaders := map[int32]*sarama.Broker{}
	for _, tp := range tps {
		b, err := client.Leader(tp.topic, tp.partition)
		if err != nil {
			fail(tp.topic, fmt.Errorf("leader of partition %d: %w", tp.partition, err))
			continue
		}
		byLeader[b.ID()] = append(byLeader[b.ID()], tp)
		leaders[b.ID()] = b
	}
	cfg := client.Config()
	out := make(map[topicPartition]int64, len(tps))
	for id, tps := range byLeader {
		if ctx.Err() != nil {
			return out
		}
		req := sarama.NewOffsetRequest(cfg.Version)
		if req.Version >= 2 {
			req.IsolationLevel = cfg.Consumer.IsolationLevel
		}
		for _, tp := range tps {
			req.AddBlock(tp.topic, tp.partition, when, 1)
		}
		resp, err := leaders[id].GetAvailableOffsets(req)
		for _, tp := range tps {
			if err != nil {
				fail(tp.topic, fmt.Errorf("offsets from broker %d: %w", id, err))
				continue
			}
			b := resp.GetBlock(tp.topic, tp.partition)
			switch {
			case b == nil:
				fail(tp.topic, fmt.Errorf("offset of partition %d: %w", tp.partition, sarama.ErrIncompleteResponse))
			case b.Err != sarama.ErrNoError:
				fail(tp.topic, fmt.Errorf("offset of partition %d: %w", tp.partition, b.Err))
			case len(b.Offsets) != 1:
				fail(tp.topic, fmt.Errorf("offset of partition %d: %d offsets in the answer", tp.partition, len(b.Offsets)))
			default:
				out[tp] = b.Offsets[0]
			}
		}
	}
	return out
}

// groupClaims is what the group's members hold, by topic: as described
// when the group is stable, nothing when it is empty or gone, and what
// they held at the last stable state (stable) while it rebalances.
func groupClaims(admin sarama.ClusterAdmin, group string, stable map[string]map[int32]bool) (map[string]map[int32]bool, error) {
	desc, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]bool{}
	for _, g := range desc {
		if errors.Is(g.Err, sarama.ErrGroupIDNotFound) {
			return out, nil // not joined yet: no member holds anything
		}
		if g.Err != sarama.ErrNoError {
			return nil, g.Err
		}
		switch g.State {
		case "Stable":
		case "Empty", "Dead":
			return out, nil
		default: // PreparingRebalance, CompletingRebalance
			return stable, nil
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
