// Package ledger keeps the offset book of one partition: which offsets were
// admitted, which are finished, and the watermark, the next offset that is safe
// to commit. It is a plain data structure: no actors, no Kafka, no I/O, no
// locks. Its single owner (the partition actor) serialises access.
package ledger

import (
	"errors"
	"fmt"
)

// ErrOutOfOrder is returned by Admit when an offset is not greater than the
// last admitted one. Kafka delivers a partition in offset order; a smaller or
// repeated offset is a redelivery that the ledger must not count twice.
var ErrOutOfOrder = errors.New("ledger: offset admitted out of order")

// ErrUnknownOffset is returned by Finish for an offset that is not in flight:
// never admitted, or already finished and passed by the watermark.
var ErrUnknownOffset = errors.New("ledger: offset not in flight")

// ErrAlreadyFinished is returned by Finish for an offset finished before.
var ErrAlreadyFinished = errors.New("ledger: offset already finished")

// Ledger tracks admitted offsets of one partition in admission order.
//
// Guarantee: Watermark never passes an admitted offset that is not finished,
// never moves backwards, and equals the lowest unfinished admitted offset, or
// one past the last admitted offset when every admitted offset is finished.
// Offsets may have gaps (compacted topics, transaction markers); a gap is
// never waited for because it was never admitted.
//
// Cost: Admit is amortised O(1). Finish is O(1) when the offsets in flight are
// contiguous and O(log n) otherwise (n = offsets in flight). Advancing the
// watermark is amortised O(1) per offset. The ring holds every admitted
// offset from the oldest unfinished one to the last admitted, finished ones
// included: it grows by doubling to the widest such span seen and is then
// reused (no allocation per record in steady state). The span, not the
// number in flight, sets its size: one record pinned while many after it
// finish keeps them all in the ring.
type Ledger struct {
	offsets []int64 // ring buffer of admitted offsets, ascending from head
	done    []bool  // done[i] reports whether offsets[i] is finished
	head    int     // ring index of the oldest entry; that entry is never finished
	n       int     // entries in the ring
	pending int     // entries not finished; n also counts finished ones behind the head

	admitted bool  // whether any offset was ever admitted
	last     int64 // the last admitted offset
}

// New returns an empty ledger with room for capacity offsets before it grows.
func New(capacity int) *Ledger {
	if capacity < 1 {
		capacity = 1
	}
	return &Ledger{offsets: make([]int64, capacity), done: make([]bool, capacity)}
}

// Admit records that offset is in flight. Offsets must increase strictly.
func (l *Ledger) Admit(offset int64) error {
	if l.admitted && offset <= l.last {
		return fmt.Errorf("%w: %d after %d", ErrOutOfOrder, offset, l.last)
	}
	if l.n == len(l.offsets) {
		l.grow()
	}
	i := l.index(l.n)
	l.offsets[i] = offset
	l.done[i] = false
	l.n++
	l.pending++
	l.admitted = true
	l.last = offset
	return nil
}

// Finish records that offset is finished. It reports whether the watermark
// moved, so the caller knows when a new commit is worth making.
func (l *Ledger) Finish(offset int64) (advanced bool, err error) {
	pos, ok := l.find(offset)
	if !ok {
		return false, fmt.Errorf("%w: %d", ErrUnknownOffset, offset)
	}
	i := l.index(pos)
	if l.done[i] {
		return false, fmt.Errorf("%w: %d", ErrAlreadyFinished, offset)
	}
	l.done[i] = true
	l.pending--
	if pos != 0 {
		return false, nil
	}
	// The oldest entry finished: pop every finished entry from the head.
	for l.n > 0 && l.done[l.head] {
		l.head = l.index(1)
		l.n--
	}
	return true, nil
}

// Watermark returns the next offset to commit: the lowest admitted offset not
// yet finished, or one past the last admitted offset when all are finished.
// ok is false until the first offset is admitted.
func (l *Ledger) Watermark() (offset int64, ok bool) {
	if !l.admitted {
		return 0, false
	}
	if l.n > 0 {
		return l.offsets[l.head], true
	}
	return l.last + 1, true
}

// InFlight returns the number of admitted offsets not yet finished.
func (l *Ledger) InFlight() int { return l.pending }

// Last returns the last admitted offset; ok is false before the first.
func (l *Ledger) Last() (offset int64, ok bool) { return l.last, l.admitted }

// index maps a logical position (0 = head) to a ring index.
func (l *Ledger) index(pos int) int {
	i := l.head + pos
	if i >= len(l.offsets) {
		i -= len(l.offsets)
	}
	return i
}

// find returns the logical position of offset among the entries in the ring.
func (l *Ledger) find(offset int64) (int, bool) {
	if l.n == 0 {
		return 0, false
	}
	first := l.offsets[l.head]
	if offset < first || offset > l.last {
		return 0, false
	}
	// Fast path: no gaps between the head and offset.
	if d := offset - first; d < int64(l.n) && l.offsets[l.index(int(d))] == offset {
		return int(d), true
	}
	lo, hi := 0, l.n-1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		switch v := l.offsets[l.index(mid)]; {
		case v == offset:
			return mid, true
		case v < offset:
			lo = mid + 1
		default:
			hi = mid - 1
		}
	}
	return 0, false
}

// grow doubles the ring, unwrapping it so the head is at index 0.
func (l *Ledger) grow() {
	size := 2 * len(l.offsets)
	offsets := make([]int64, size)
	done := make([]bool, size)
	for pos := 0; pos < l.n; pos++ {
		offsets[pos] = l.offsets[l.index(pos)]
		done[pos] = l.done[l.index(pos)]
	}
	l.offsets, l.done, l.head = offsets, done, 0
}
