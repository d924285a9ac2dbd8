// Package ledger keeps the offset book of one partition: which offsets were
// admitted, which are finished, and the watermark, the next offset that is safe
// to commit. It also writes and reads the commit metadata that carries the
// offsets finished above the watermark across a crash or a handover
// (metadata.go). It is a plain data structure: no actors, no Kafka, no I/O, no
// locks. Its single owner (the partition actor) serialises access.
package ledger

import (
	"errors"
	"fmt"
	"math"
)

// ErrOutOfOrder is returned by Admit when an offset is not greater than the
// last admitted one. Kafka delivers a partition in offset order; a smaller or
// repeated offset is a redelivery that the ledger must not count twice.
var ErrOutOfOrder = errors.New("ledger: offset admitted out of order")

// ErrUnknownOffset is returned by Finish for an offset that is not in flight:
// never admitted, or already finished and no longer tracked.
var ErrUnknownOffset = errors.New("ledger: offset not in flight")

// ErrAlreadyFinished is returned by Finish for an offset finished before and
// still tracked (one that the ledger has forgotten gets ErrUnknownOffset).
var ErrAlreadyFinished = errors.New("ledger: offset already finished")

// Ledger tracks the admitted offsets of one partition.
//
// Guarantee: Watermark never passes an admitted offset that is not finished,
// never moves backwards, and equals the lowest unfinished admitted offset, or
// one past the last admitted offset when every admitted offset is finished.
// Offsets may have gaps (compacted topics, transaction markers); a gap is
// never waited for because it was never admitted.
//
// Cost: memory is bounded by the records in flight, not by the span of
// offsets behind an unfinished one: the ring holds the unfinished offsets
// and, between compactions, finished ones after the oldest unfinished one;
// it compacts instead of growing while at most half its entries are
// unfinished, so its slots never exceed max(the initial capacity, 4 × the
// most offsets ever in flight at once) (Slots). One record pinned while a
// million finish after it keeps a ring of a few slots. Admit is amortised
// O(1); Finish is O(1) while the ring holds contiguous offsets and O(log n)
// otherwise (n = entries in the ring); advancing the watermark is amortised
// O(1) per offset. No allocation per record in steady state.
type Ledger struct {
	offsets []int64 // ring buffer of admitted offsets, ascending from head
	done    []bool  // done[i] reports whether offsets[i] is finished
	head    int     // ring index of the oldest entry; that entry is never finished
	n       int     // entries in the ring, finished ones behind the head included
	pending int     // entries not finished
	// after[i], for an unfinished entry, is the lowest offset this ledger
	// finished between offsets[i] and the next unfinished entry (noneAfter
	// when it finished none), and afterPrint[i] that record's fingerprint:
	// the metadata names the lowest finished record above the watermark
	// (metadata.go), and compaction drops the finished entries that would
	// otherwise say which it is. Meaningless for finished entries.
	after      []int64
	afterPrint []uint32

	admitted bool  // whether any offset was ever admitted
	last     int64 // the last admitted offset
	// highestFinished is the highest offset finished by this ledger; -1
	// before the first.
	highestFinished int64
	// tail is the fingerprint of the record at highestFinished (FinishRecord).
	tail uint32
	// reading is the token the metadata carries (SetReading).
	reading string

	// restored is what an earlier owner committed (Restore); nil when none,
	// and once Commit finds the admitted offsets past its span.
	restored *Resume
	// scratch is reused by Commit to build the metadata.
	scratch []int64
	buf     []byte
}

// noneAfter is after[i] when the ledger finished no offset after entry i
// (below the next unfinished one): lower than any offset that can follow an
// entry, negative offsets included.
const noneAfter = math.MinInt64

// New returns an empty ledger with room for capacity offsets before it grows.
func New(capacity int) *Ledger {
	if capacity < 1 {
		capacity = 1
	}
	return &Ledger{offsets: make([]int64, capacity), done: make([]bool, capacity),
		after: make([]int64, capacity), afterPrint: make([]uint32, capacity), highestFinished: -1}
}

// Admit records that offset is in flight. Offsets must increase strictly.
func (l *Ledger) Admit(offset int64) error {
	if l.admitted && offset <= l.last {
		return fmt.Errorf("%w: %d after %d", ErrOutOfOrder, offset, l.last)
	}
	if l.n == len(l.offsets) {
		if 2*l.pending <= l.n {
			l.compact()
		} else {
			l.grow()
		}
	}
	i := l.index(l.n)
	l.offsets[i] = offset
	l.done[i] = false
	l.after[i] = noneAfter
	l.n++
	l.pending++
	l.admitted = true
	l.last = offset
	return nil
}

// Finish is FinishRecord with fingerprint 0, for callers whose commits are
// never resumed from (a resume checks the fingerprint against the log).
func (l *Ledger) Finish(offset int64) (advanced bool, err error) {
	return l.FinishRecord(offset, 0)
}

// FinishRecord records that offset is finished; fingerprint identifies its
// record in the log's history, and the metadata names the fingerprints of
// the lowest finished record and of the last offset it speaks of. It
// reports whether the watermark moved, so the caller knows when a new
// commit is worth making.
func (l *Ledger) FinishRecord(offset int64, fingerprint uint32) (advanced bool, err error) {
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
	if offset > l.highestFinished {
		l.highestFinished, l.tail = offset, fingerprint
	}
	if pos != 0 {
		// The entry just before, when unfinished, now has this offset
		// finished after it: it keeps what it noted (finished offsets
		// between the two, their entries compacted away, lie lower) or, with
		// none, notes this one. When that entry is finished instead, the
		// nearest unfinished entry has it, or lower, noted already. What
		// this entry noted after itself lies higher and is no longer needed.
		// So the lowest finished offset after each unfinished entry stays
		// known, in O(1).
		if p := l.index(pos - 1); !l.done[p] && l.after[p] == noneAfter {
			l.after[p], l.afterPrint[p] = offset, fingerprint
		}
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

// Slots returns the ledger's ring capacity, the measure of its memory (a
// slot holds two offsets, a flag and a fingerprint: 21 bytes).
func (l *Ledger) Slots() int { return len(l.offsets) }

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
	// Fast path: no gaps (and no compaction) between the head and offset.
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

// compact drops the finished entries behind the head, in place and in
// logical order: an entry is written only to a position already read. The
// head entry is unfinished, so it stays where it is.
func (l *Ledger) compact() {
	w := 0
	for pos := 0; pos < l.n; pos++ {
		i := l.index(pos)
		if l.done[i] {
			continue
		}
		j := l.index(w)
		l.offsets[j], l.done[j] = l.offsets[i], false
		l.after[j], l.afterPrint[j] = l.after[i], l.afterPrint[i]
		w++
	}
	l.n = w
}

// grow doubles the ring, unwrapping it so the head is at index 0.
func (l *Ledger) grow() {
	size := 2 * len(l.offsets)
	offsets := make([]int64, size)
	done := make([]bool, size)
	after := make([]int64, size)
	afterPrint := make([]uint32, size)
	for pos := 0; pos < l.n; pos++ {
		i := l.index(pos)
		offsets[pos], done[pos], after[pos], afterPrint[pos] = l.offsets[i], l.done[i], l.after[i], l.afterPrint[i]
	}
	l.offsets, l.done, l.after, l.afterPrint, l.head = offsets, done, after, afterPrint, 0
}

// lowestFinished returns the lowest offset above the watermark that this
// ledger finished, and its record's fingerprint; ok is false when it
// finished none there.
func (l *Ledger) lowestFinished() (offset int64, fingerprint uint32, ok bool) {
	for pos := 0; pos < l.n; pos++ {
		if i := l.index(pos); !l.done[i] && l.after[i] != noneAfter {
			return l.after[i], l.afterPrint[i], true
		}
	}
	return 0, 0, false
}

// unfinished calls yield with each unfinished admitted offset, ascending.
func (l *Ledger) unfinished(yield func(int64)) {
	for pos := 0; pos < l.n; pos++ {
		if i := l.index(pos); !l.done[i] {
			yield(l.offsets[i])
		}
	}
}
