package actors

import (
	"context"
	"sync"

	"github.com/IBM/sarama"
)

// readAhead takes a claim's records from sarama as they come, ahead of the
// bridge's credits, up to a bound in records and in bytes; once it reaches
// either, it takes none until the bridge has taken half of what it holds.
//
// Why: sarama's broker consumer hands each partition its part of a fetch
// response and fetches again (and lets a revoked partition go, closing its
// claim) only once every partition has taken the whole of its part, or has
// taken nothing for twice Consumer.MaxProcessingTime. A bridge that took a
// record each time a credit came back took its part slowly but steadily,
// never tripping that timeout: a cooperative revoke (and every partition's
// next fetch) waited until thousands of small records had been admitted
// (TestCooperativeRevokeWhileConsumingSlowly: 12 s). Reading ahead takes the
// part at once when it fits, and otherwise stops taking for long enough
// that sarama sets the partition aside and goes on.
//
// Memory: at most readAheadRecords records, and readAheadBytes bytes of keys,
// values and headers (recordBytes; the last record taken may pass it), per
// claim, besides sarama's own buffers. The records it holds are not admitted: when the
// claim ends they are dropped, never marked, and Kafka delivers them again.
type readAhead struct {
	// out holds the records taken, in offset order; its capacity is the
	// records bound, so a send never waits.
	out chan *sarama.ConsumerMessage
	// ended is closed once the goroutine finds the claim's channel closed
	// (a revoke, or the session's end), out holding everything taken
	// before; while it waits for room it reads nothing, so sees no close.
	ended chan struct{}
	// room is signalled when a full read-ahead has been taken down to half.
	room chan struct{}
	done chan struct{} // closed when the reading goroutine has returned
	// asks carries position requests (position): the goroutine takes
	// what sarama's channel holds, then answers next.
	asks chan chan int64
	// next is one past the last offset taken; -1 before the first. Only
	// the reading goroutine touches it.
	next int64

	maxRecords int
	maxBytes   int64

	mu      sync.Mutex
	bytes   int64 // of the records in out
	waiting bool  // the goroutine waits for room
}

// readAheadRecords and readAheadBytes bound a claim's read-ahead: as many
// records as sarama's channel holds by default four times over, and as many
// bytes as its default fetch from one partition (Consumer.Fetch.Default).
const (
	readAheadRecords = 1024
	readAheadBytes   = 1 << 20
)

// newReadAhead starts taking from in until it closes or ctx is done; wait
// for the goroutine with stop.
func newReadAhead(ctx context.Context, in <-chan *sarama.ConsumerMessage, maxRecords int, maxBytes int64) *readAhead {
	r := &readAhead{out: make(chan *sarama.ConsumerMessage, maxRecords), ended: make(chan struct{}),
		room: make(chan struct{}, 1), done: make(chan struct{}), asks: make(chan chan int64), next: -1,
		maxRecords: maxRecords, maxBytes: maxBytes}
	go r.run(ctx, in)
	return r
}

func (r *readAhead) run(ctx context.Context, in <-chan *sarama.ConsumerMessage) {
	defer close(r.done)
	for {
		select {
		case msg, ok := <-in:
			if !ok {
				close(r.ended)
				return
			}
			if !r.put(ctx, msg) {
				return
			}
		case reply := <-r.asks:
			// What sarama's channel holds now is what it had delivered
			// before the request: take it, then answer.
			for n := len(in); n > 0; n-- {
				msg, ok := <-in
				if !ok {
					close(r.ended)
					return
				}
				if !r.put(ctx, msg) {
					return
				}
			}
			reply <- r.next // reply has room for one answer
		case <-ctx.Done():
			return
		}
	}
}

// put hands m to the bridge; once the read-ahead is full, it waits for the
// bridge to take half of what it holds. It returns false when ctx is done
// first.
func (r *readAhead) put(ctx context.Context, m *sarama.ConsumerMessage) bool {
	r.mu.Lock()
	r.bytes += recordBytes(m)
	full := len(r.out)+1 >= r.maxRecords || r.bytes >= r.maxBytes
	r.waiting = full
	r.mu.Unlock()
	r.next = m.Offset + 1
	r.out <- m // never waits: out has room for maxRecords and holds fewer
	if full {
		select {
		case <-r.room:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// position returns one past the last offset the read-ahead has taken from
// sarama, once it has taken everything sarama's channel held when asked
// (-1 when it has taken none); ok is false when the claim ended first.
// What ends the wait: the read-ahead taking that much, which waits for
// room as the bridge admits records, or its goroutine returning (the
// claim's channel closed, or ctx done).
func (r *readAhead) position(ctx context.Context) (next int64, ok bool) {
	reply := make(chan int64, 1)
	select {
	case r.asks <- reply:
	case <-r.done:
		return 0, false
	case <-ctx.Done():
		return 0, false
	}
	select {
	case next := <-reply:
		return next, true
	case <-r.done:
		return 0, false
	case <-ctx.Done():
		return 0, false
	}
}

// took accounts for a record the bridge received from out.
func (r *readAhead) took(m *sarama.ConsumerMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bytes -= recordBytes(m)
	if r.waiting && 2*len(r.out) <= r.maxRecords && 2*r.bytes <= r.maxBytes {
		r.waiting = false
		r.room <- struct{}{} // room's one slot is free: the goroutine took the last signal before it waited
	}
}

// queued returns how many records the read-ahead holds.
func (r *readAhead) queued() int { return len(r.out) }

// isEnded reports whether sarama has closed the claim's channel.
func (r *readAhead) isEnded() bool { return isClosed(r.ended) }

// stop waits for the reading goroutine, whose ctx must be done or whose
// input closed.
func (r *readAhead) stop() { <-r.done }

// recordBytes is what m holds in memory, as WireBytes counts it: its key,
// its value and its headers, each with HeaderOverhead (a record of
// thousands of empty headers and no value is not free).
func recordBytes(m *sarama.ConsumerMessage) int64 {
	n := int64(len(m.Key) + len(m.Value))
	for _, h := range m.Headers {
		n += HeaderOverhead
		if h != nil {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}
