package actors

import (
	"fmt"
	"slices"
	"testing"

	"github.com/IBM/sarama"
	"pgregory.net/rapid"
)

// modelBatch is a record batch of a model partition: offsets first to last,
// records at some of them (compaction leaves holes; a control batch has
// none a consumer is given), a size on the wire, and whether it decompresses
// past the limit.
type modelBatch struct {
	first, last int64
	records     []int64
	size        int
	bad         bool
}

// modelLog is a partition as a broker serves it (KIP-74): a fetch at x
// returns the first batch whose last offset is x or more, whatever its
// size, then the batches after it while they fit in maxBytes; decoding the
// answer fails when any batch in it is bad.
type modelLog struct {
	batches []modelBatch
	fetches int
}

func (l *modelLog) end() int64 {
	if len(l.batches) == 0 {
		return 0
	}
	return l.batches[len(l.batches)-1].last + 1
}

// at returns the index of the first batch whose last offset is x or more;
// len(batches) when none is.
func (l *modelLog) at(x int64) int {
	return slices.IndexFunc(append(slices.Clip(l.batches), modelBatch{last: x}), func(b modelBatch) bool { return b.last >= x })
}

func (l *modelLog) read(x int64, maxBytes int32) ([]ReadBatch, error) {
	l.fetches++
	if x > l.end() {
		return nil, fmt.Errorf("fetch at %d: %w", x, sarama.ErrOffsetOutOfRange)
	}
	var out []ReadBatch
	size := 0
	for i := l.at(x); i < len(l.batches); i++ {
		b := l.batches[i]
		if size += b.size; len(out) > 0 && size > int(maxBytes) {
			break
		}
		if b.bad {
			return nil, fmt.Errorf("decode: %w", sarama.ErrDecompressedBatchTooLarge)
		}
		rb := ReadBatch{First: b.first, Last: b.last}
		for _, o := range b.records {
			rb.Records = append(rb.Records, &sarama.ConsumerMessage{Offset: o})
		}
		out = append(out, rb)
	}
	return out, nil
}

// fails reports whether a fetch at x of maxBytes fails on a bad batch.
func (l *modelLog) fails(x int64, maxBytes int32) bool {
	_, err := l.read(x, maxBytes)
	return err != nil
}

func drawLog(t *rapid.T) *modelLog {
	n := rapid.IntRange(0, 25).Draw(t, "batches")
	l := &modelLog{}
	next := int64(0)
	for i := range n {
		if rapid.IntRange(0, 9).Draw(t, fmt.Sprint("gap?", i)) >= 7 {
			next += int64(rapid.IntRange(1, 3).Draw(t, fmt.Sprint("gap", i)))
		}
		count := int64(rapid.IntRange(1, 5).Draw(t, fmt.Sprint("offsets", i)))
		b := modelBatch{first: next, last: next + count - 1, size: rapid.IntRange(1, 300).Draw(t, fmt.Sprint("size", i)),
			bad: rapid.IntRange(0, 3).Draw(t, fmt.Sprint("bad", i)) == 0}
		if rapid.IntRange(0, 3).Draw(t, fmt.Sprint("control?", i)) > 0 {
			for o := b.first; o <= b.last; o++ {
				if o == b.last || rapid.IntRange(0, 6).Draw(t, fmt.Sprint("kept", o)) > 0 {
					b.records = append(b.records, o)
				}
			}
		}
		l.batches = append(l.batches, b)
		next = b.last + 1
	}
	return l
}

// The walk past unreadable batches, on any partition of good and bad
// batches (gaps, control batches, records compacted away, a readable batch
// wedged between bad ones) and any position and fetch window:
//   - a clean verdict is right: the consumer's own fetch, from wherever it
//     stands between the position and its first undelivered record, does
//     not fail;
//   - every offset dead-lettered is unreadable: a fetch of one batch there
//     fails;
//   - nothing readable is lost: every record of a readable batch from the
//     position up to where the claim restarts is handed over, once, in
//     offset order, and every offset of a bad batch there is dead-lettered;
//   - where the claim restarts, the consumer's fetch does not fail (or
//     there is nothing more to read).
func TestWalkPastUnreadableBatchesSkipsOnlyWhatCannotBeRead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := drawLog(t)
		window := int32(rapid.IntRange(1, 600).Draw(t, "window"))
		pos := rapid.Int64Range(0, l.end()).Draw(t, "position")
		// The consumer stands between pos and the first record at or past
		// pos: it delivered everything before that, and nothing after.
		first := l.end()
		for _, b := range l.batches {
			if i := slices.IndexFunc(b.records, func(o int64) bool { return o >= pos }); i >= 0 {
				first = b.records[i]
				break
			}
		}
		consumer := rapid.Int64Range(pos, first).Draw(t, "consumer")

		checkWalk(t, l, window, pos, consumer)
	})
}

// fatal is what checkWalk needs of *testing.T and *rapid.T.
type fatal interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkWalk walks l from pos with window, its consumer standing at
// consumer, and checks what the walk did (see
// TestWalkPastUnreadableBatchesSkipsOnlyWhatCannotBeRead).
func checkWalk(t fatal, l *modelLog, window int32, pos, consumer int64) {
	t.Helper()
	consumerFails := l.fails(consumer, window)
	checks := l.fetches // the test's own fetches are not the walk's
	var items []unreadableItem
	outcome, next, err := walkUnreadable(pos, window, l.read, func(it unreadableItem) bool {
		items = append(items, it)
		return true
	})
	walkFetches := l.fetches - checks
	if err != nil {
		t.Fatalf("walk failed: %v", err)
	}
	switch outcome {
	case walkClean:
		if consumerFails {
			t.Fatalf("walk found the partition clean, but the consumer's fetch at %d (window %d) fails", consumer, window)
		}
		if len(items) > 0 {
			t.Fatalf("a clean walk handed over %d items", len(items))
		}
		return
	case walkPast:
	default:
		t.Fatalf("outcome %v", outcome)
	}
	for i := 1; i < len(items); i++ {
		if items[i].offset <= items[i-1].offset {
			t.Fatalf("items out of order: %d after %d", items[i].offset, items[i-1].offset)
		}
	}
	handed := map[int64]unreadableItem{}
	for _, it := range items {
		if it.offset < pos || it.offset >= next {
			t.Fatalf("item at %d outside [%d, %d)", it.offset, pos, next)
		}
		if it.record == nil && !l.fails(it.offset, 1) {
			t.Fatalf("offset %d dead-lettered, but a fetch there reads", it.offset)
		}
		handed[it.offset] = it
	}
	for _, b := range l.batches {
		for o := max(b.first, pos); o <= b.last && o < next; o++ {
			it, ok := handed[o]
			switch {
			case b.bad && (!ok || it.record != nil):
				t.Fatalf("offset %d of a bad batch [%d, %d] not dead-lettered before the restart at %d", o, b.first, b.last, next)
			case !b.bad && slices.Contains(b.records, o) && (!ok || it.record == nil):
				t.Fatalf("record %d of a readable batch [%d, %d] not handed over before the restart at %d (handed %v)", o, b.first, b.last, next, ok)
			}
		}
	}
	if l.at(next) < len(l.batches) && l.fails(next, window) {
		t.Fatalf("the claim restarts at %d, where the consumer's fetch (window %d) fails", next, window)
	}
	// Besides the checks above: a fetch per batch while looking for the
	// failing window, then a fetch per batch or offset, and a window
	// fetch after each run of unreadable offsets.
	unreadable := 0
	for _, it := range items {
		if it.record == nil {
			unreadable++
		}
	}
	if bound := 2*len(l.batches) + 2*unreadable + 8; walkFetches > bound {
		t.Fatalf("%d fetches for %d batches and %d unreadable offsets", walkFetches, len(l.batches), unreadable)
	}
}

// Shapes the property meets only now and then, each in its own case: a
// readable batch between two unreadable ones; a run of unreadable batches
// reaching the end of the log; a consumer past a control batch the window
// at its position stops short of the bad batch after it.
func TestWalkPastUnreadableBatchesShapes(t *testing.T) {
	good := func(first, last int64, size int) modelBatch {
		b := modelBatch{first: first, last: last, size: size}
		for o := first; o <= last; o++ {
			b.records = append(b.records, o)
		}
		return b
	}
	bad := func(first, last int64, size int) modelBatch {
		b := good(first, last, size)
		b.bad = true
		return b
	}
	control := func(offset int64, size int) modelBatch { return modelBatch{first: offset, last: offset, size: size} }
	for _, c := range []struct {
		name          string
		batches       []modelBatch
		window        int32
		pos, consumer int64
	}{
		{"good between bad", []modelBatch{good(0, 1, 10), bad(2, 5, 10), good(6, 6, 10), bad(7, 9, 10), good(10, 12, 10)}, 1000, 0, 0},
		{"bad to the end", []modelBatch{good(0, 1, 10), bad(2, 3, 10), bad(4, 4, 10)}, 1000, 2, 2},
		{"consumer past a control batch", []modelBatch{control(0, 100), good(1, 1, 100), bad(2, 2, 10), good(3, 3, 10)}, 200, 0, 1},
		{"bad batch in a gap's shadow", []modelBatch{good(0, 0, 10), bad(3, 4, 10), good(7, 8, 10)}, 1000, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkWalk(t, &modelLog{batches: c.batches}, c.window, c.pos, c.consumer)
		})
	}
}
