package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// Baseline designs: what patchflow replaces.
const (
	// DesignSequential handles one record at a time per partition and marks
	// its offset after each; sarama commits the marks (every second, as for
	// the pipeline).
	DesignSequential = "sequential-per-partition"
	// DesignSequentialConsumers is several consumer-group members in one
	// process, each handling one record at a time across its partitions.
	DesignSequentialConsumers = "sequential-consumers"
	// DesignSequentialSyncCommit is DesignSequential with a synchronous
	// session.Commit() after every record. With sarama that commit shares
	// the broker connection with the fetch long-poll and waits behind it (up
	// to Consumer.MaxWaitTime, 500 ms), so this design is slower than its
	// concurrency / latency suggests; it is reported to show why.
	DesignSequentialSyncCommit = "sequential-sync-commit"
)

// sequential is the design patchflow replaces: each consumer handles one
// record at a time. With perPartition, every claimed partition has its own
// sequential loop (one in flight per partition); otherwise the whole member
// handles one record at a time.
type sequential struct {
	latency      time.Duration
	perPartition bool
	syncCommit   bool
	members      sync.Map // member id -> *sync.Mutex: one record at a time per member
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
			var mu *sync.Mutex
			if !s.perPartition {
				v, _ := s.members.LoadOrStore(sess.MemberID(), &sync.Mutex{})
				mu = v.(*sync.Mutex)
				mu.Lock()
			}
			time.Sleep(s.latency)
			sess.MarkMessage(m, "")
			if s.syncCommit {
				sess.Commit()
			}
			if mu != nil {
				mu.Unlock()
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

// Sequential measures one of the sequential designs with members consumers
// in one process.
func Sequential(src Source, design string, latency time.Duration, partitions, members int, w Window) (Point, error) {
	h := &sequential{latency: latency}
	concurrency := members
	switch design {
	case DesignSequential:
		h.perPartition, concurrency = true, partitions
	case DesignSequentialSyncCommit:
		h.perPartition, h.syncCommit, concurrency = true, true, partitions
	case DesignSequentialConsumers:
	default:
		return Point{}, fmt.Errorf("unknown baseline %q", design)
	}
	ideal := idealRate(concurrency, latency)
	brokers, topic, id, produced, done, err := src.Topic(partitions, recordsFor(ideal, w))
	if err != nil {
		return Point{}, err
	}
	defer done()
	var handled atomic.Int64
	h.done = &handled
	// Members join one by one and the group rebalances meanwhile: the
	// window starts once every partition has handled a record.
	settled := func() bool { return h.active.Load() >= int64(partitions) }
	n, secs, cpu, err := runGroup(group{brokers: brokers, topic: topic, id: id, records: produced}, actors.DefaultSettings(), h, members, w, &handled, settled, latency)
	if err != nil {
		return Point{}, err
	}
	return point(src.Name(), ScenarioBaseline, design, latency, concurrency, partitions, n, secs, cpu, ideal), nil
}
