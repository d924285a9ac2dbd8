package actors

import (
	"errors"
	"sync"
)

// MarkCommit hands sarama the commit (offset, metadata) of a claim whose
// last mark was marked (-1 before the first), offset >= marked. A first
// commit is marked and then reset at the same offset: sarama's offset
// manager starts at the committed offset, ignores a mark that does not move
// past it, and takes a reset at or below it, so whichever way the claim
// began, sarama then holds (offset, metadata).
func MarkCommit(m OffsetMarker, topic string, partition int32, marked, offset int64, metadata string) {
	switch {
	case offset > marked:
		m.MarkOffset(topic, partition, offset, metadata)
		if marked < 0 {
			m.ResetOffset(topic, partition, offset, metadata)
		}
	case offset == marked:
		m.ResetOffset(topic, partition, offset, metadata)
	}
}

// OffsetMarker is the part of sarama.ConsumerGroupSession the partition actor
// uses. MarkOffset records offset as the next offset to consume, with its
// metadata; sarama commits both with the session's next commit, and ignores
// a mark that does not move forward. ResetOffset at the offset last marked
// is how the actor replaces the metadata alone (sarama takes it for any
// offset not above the last mark; the actor never passes a lower one).
type OffsetMarker interface {
	MarkOffset(topic string, partition int32, offset int64, metadata string)
	ResetOffset(topic string, partition int32, offset int64, metadata string)
}

// fencedMarker forwards marks until the bridge closes it when its claim ends.
// A partition actor that outlives its claim (a drain reply lost to a timeout)
// can then never mark for a claim that another member may already own.
type fencedMarker struct {
	mu     sync.Mutex
	inner  OffsetMarker
	closed bool
}

func (f *fencedMarker) MarkOffset(topic string, partition int32, offset int64, metadata string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.inner.MarkOffset(topic, partition, offset, metadata)
	}
}

func (f *fencedMarker) ResetOffset(topic string, partition int32, offset int64, metadata string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.inner.ResetOffset(topic, partition, offset, metadata)
	}
}

// errClaimEnded is a fence's answer once its claim has ended.
var errClaimEnded = errors.New("the claim has ended")

func (f *fencedMarker) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func (f *fencedMarker) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}
