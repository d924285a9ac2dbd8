// Package ordering decides which admitted records of one partition may run
// now and which wait for an earlier record. It is a plain data structure with
// no actors, Kafka or I/O; its single owner (the partition actor) serialises
// access.
package ordering

import (
	"fmt"
	"hash/maphash"
)

// Mode is an ordering guarantee within one partition.
type Mode int

const (
	// ByKey runs records with the same key one at a time, in offset order;
	// records with different keys, or without a key, run concurrently.
	ByKey Mode = iota
	// ByPartition runs one record of the partition at a time, in offset order.
	ByPartition
	// Unordered runs every admitted record at once.
	Unordered
)

// String returns the name used in configuration.
func (m Mode) String() string {
	switch m {
	case ByKey:
		return "key"
	case ByPartition:
		return "partition"
	case Unordered:
		return "unordered"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode turns a configuration value into a Mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "key":
		return ByKey, nil
	case "partition":
		return ByPartition, nil
	case "unordered":
		return Unordered, nil
	}
	return 0, fmt.Errorf("unknown ordering %q (want key, partition or unordered)", s)
}

// Gate holds back a record while an earlier record it must follow is running.
//
// Guarantee: in ByKey mode at most one record per non-empty key is running,
// and the records of a key start in the order they were admitted; in
// ByPartition mode the same holds for the partition as a whole.
//
// Cost: O(1) per Admit and Release, with no allocation per record: keys are
// tracked by a 64-bit seeded hash, not copied. Two keys whose hashes collide
// (about one chance in 2^64 per pair) merely run one after the other, which
// keeps every guarantee. A busy key costs one map entry; a key with records
// waiting also holds a queue, recycled when the key goes idle.
type Gate struct {
	mode   Mode
	busy   map[uint64]*queue       // ByKey: hashes of keys with a running record -> waiting offsets (nil when none wait)
	hash   func(key []byte) uint64 // seeded maphash; tests force collisions
	whole  queue                   // ByPartition: waiting offsets
	locked bool                    // ByPartition: a record is running
	free   []*queue                // recycled queues
	held   int
}

// NewGate returns an empty gate for mode.
func NewGate(mode Mode) *Gate {
	seed := maphash.MakeSeed()
	return &Gate{mode: mode, busy: make(map[uint64]*queue), hash: func(key []byte) uint64 { return maphash.Bytes(seed, key) }}
}

// Admit offers a newly admitted record. It reports true when the record may
// start now; otherwise the gate holds it until Release hands it out.
func (g *Gate) Admit(key []byte, offset int64) (runNow bool) {
	switch g.mode {
	case ByPartition:
		if !g.locked {
			g.locked = true
			return true
		}
		g.whole.push(offset)
		g.held++
		return false
	case ByKey:
		if len(key) == 0 {
			return true
		}
		h := g.hash(key)
		q, running := g.busy[h]
		if !running {
			g.busy[h] = nil
			return true
		}
		if q == nil {
			q = g.newQueue()
			g.busy[h] = q
		}
		q.push(offset)
		g.held++
		return false
	}
	return true
}

// Release tells the gate that the running record with key finished. It
// returns the offset of the record that may start next in its place, if any.
func (g *Gate) Release(key []byte) (next int64, ok bool) {
	switch g.mode {
	case ByPartition:
		if g.whole.len() > 0 {
			g.held--
			return g.whole.pop(), true
		}
		g.locked = false
		return 0, false
	case ByKey:
		if len(key) == 0 {
			return 0, false
		}
		h := g.hash(key)
		q, running := g.busy[h]
		if !running {
			return 0, false
		}
		if q == nil || q.len() == 0 {
			delete(g.busy, h)
			if q != nil {
				g.free = append(g.free, q)
			}
			return 0, false
		}
		g.held--
		return q.pop(), true
	}
	return 0, false
}

// Waiting calls f with each record held behind the running record of key
// (in ByPartition mode, behind the partition's running record), in the
// order they will start.
func (g *Gate) Waiting(key []byte, f func(offset int64)) {
	var q *queue
	switch g.mode {
	case ByPartition:
		q = &g.whole
	case ByKey:
		if len(key) > 0 {
			q = g.busy[g.hash(key)]
		}
	}
	if q == nil {
		return
	}
	for _, o := range q.items[q.head:] {
		f(o)
	}
}

// Held returns the number of records waiting behind another.
func (g *Gate) Held() int { return g.held }

// Clear forgets every held record (they will not start) and every running
// key. The partition actor calls it when it drains.
func (g *Gate) Clear() {
	clear(g.busy)
	g.whole = queue{}
	g.locked = false
	g.held = 0
}

func (g *Gate) newQueue() *queue {
	if n := len(g.free); n > 0 {
		q := g.free[n-1]
		g.free = g.free[:n-1]
		return q
	}
	return &queue{}
}

// queue is a FIFO of offsets that reuses its backing array.
type queue struct {
	items []int64
	head  int
}

func (q *queue) push(o int64) { q.items = append(q.items, o) }

func (q *queue) len() int { return len(q.items) - q.head }

// pop removes the oldest offset. Once at least half of the array is popped,
// the offsets still waiting move to its front: a queue that never empties
// (partition order under a backlog, a key that always has records waiting)
// keeps room for about twice the offsets waiting in it, not a slot for
// every offset that passed through it. Amortised O(1): a move copies no
// more offsets than were popped since the last one.
func (q *queue) pop() int64 {
	o := q.items[q.head]
	q.head++
	if 2*q.head >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		q.items, q.head = q.items[:n], 0
	}
	return o
}
