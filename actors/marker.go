package actors

import "sync"

// OffsetMarker is the part of sarama.ConsumerGroupSession the partition actor
// uses. MarkOffset records offset as the next offset to consume; sarama
// commits it with the session's next commit.
type OffsetMarker interface {
	MarkOffset(topic string, partition int32, offset int64, metadata string)
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

func (f *fencedMarker) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}
