package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// sequential is the design patchflow replaces: each consumer handles one
// record at a time and commits after each. With perPartition, every claimed
// partition has its own sequential loop (one in flight per partition);
// otherwise the whole member handles one record at a time.
type sequential struct {
	latency      time.Duration
	perPartition bool
	mu           sync.Mutex
	done         *atomic.Int64
	started      sync.Map // partitions that handled a record
	active       atomic.Int64
}

func (s *sequential) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (s *sequential) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (s *sequential) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if !s.perPartition {
				s.mu.Lock()
			}
			time.Sleep(s.latency)
			sess.MarkMessage(m, "")
			sess.Commit() // commit after each record, synchronously
			if !s.perPartition {
				s.mu.Unlock()
			}
			if _, seen := s.started.LoadOrStore(m.Partition, true); !seen {
				s.active.Add(1)
			}
			s.done.Add(1)
		case <-sess.Context().Done():
			return nil
		}
	}
}

// Sequential measures the old design: members consumers in one process,
// each either one record at a time per partition (perPartition) or one at a
// time overall.
func Sequential(latency time.Duration, partitions, members int, perPartition bool, w Window) (Point, error) {
	concurrency := members
	design := "sequential-consumers"
	if perPartition {
		concurrency, design = partitions, "sequential-per-partition"
	}
	ideal := idealRate(concurrency, latency)
	c, brokers, err := cluster(partitions, recordsFor(ideal, w))
	if err != nil {
		return Point{}, err
	}
	defer c.Close()
	var done atomic.Int64
	h := &sequential{latency: latency, perPartition: perPartition, done: &done}
	settings := actors.DefaultSettings()
	// Members join one by one and the group rebalances meanwhile: the
	// window starts once every partition has handled a record.
	settled := func() bool { return h.active.Load() >= int64(partitions) }
	n, secs, cpu, err := runGroup(brokers, settings, h, members, w, &done, settled, latency)
	if err != nil {
		return Point{}, err
	}
	return point("baseline", design, latency, concurrency, partitions, n, secs, cpu, ideal), nil
}
