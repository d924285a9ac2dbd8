package e2e

import (
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// Partitions added to the topic while the listeners run: the topic starts
// with partitionsBefore, the stream is produced while the listeners run, and
// 10 s into it the topic grows to partitionsAfter; the producer sees the
// new partitions within a couple of seconds, so most of the stream lands on
// all of them. Besides the suite's checks (nothing lost, every host right,
// committed = end), the judge asks that every new partition received records
// and had its first commit within claimBound of the change: the group's
// leader notices a grown topic at its metadata refresh (actors.MetadataRefresh)
// and rebalances, so a new partition is claimed within about twice the
// refresh plus a rebalance, and committed a commit interval later.
const (
	partitionsBefore, partitionsAfter = 4, 8
	partitionsAddedAt                 = 10 * time.Second
)

// claimBound is how long after the change each new partition's first commit
// may come: two metadata refreshes, a rebalance and a commit, with room.
var claimBound = 2*actors.MetadataRefresh + 10*time.Second

func partitionsAddedScenario() Scenario {
	return Scenario{Name: "partitions-added", Events: 3000, Hosts: 1000, Listeners: 2, Partitions: partitionsBefore,
		StreamFor: 30 * time.Second, NoDeadLetters: true, Judge: judgePartitionsAdded,
		Faults: []Fault{{0, fmt.Sprintf("add partitions (%d → %d) %v into the stream", partitionsBefore, partitionsAfter, partitionsAddedAt), addPartitions}}}
}

func addPartitions(r *run) error {
	r.wait(time.Until(r.began.Add(partitionsAddedAt)))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(r.env.Brokers, cfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.CreatePartitions(r.topic, partitionsAfter, nil, false); err != nil {
		return err
	}
	r.partitionsAdded = time.Now()
	return nil
}

func judgePartitionsAdded(r *run, line *Line) error {
	if r.partitionsAdded.IsZero() {
		line.Problems = append(line.Problems, "the partitions were never added")
		return nil
	}
	var took []time.Duration
	for p := int32(partitionsBefore); p < partitionsAfter; p++ {
		first, ok := r.watch.firstCommit[p]
		switch {
		case !ok:
			line.Problems = append(line.Problems, fmt.Sprintf("partition %d (added) never had a record committed", p))
		case first.Sub(r.partitionsAdded) > claimBound:
			line.Problems = append(line.Problems, fmt.Sprintf("partition %d (added) first committed %.1f s after the change, over the %v bound", p, first.Sub(r.partitionsAdded).Seconds(), claimBound))
		default:
			took = append(took, first.Sub(r.partitionsAdded))
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		line.Figures = append(line.Figures, fmt.Sprintf("the added partitions' first commits %.1f-%.1f s after the change (bound %v)",
			took[0].Seconds(), took[len(took)-1].Seconds(), claimBound))
	}
	return nil
}
