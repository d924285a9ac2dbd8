package ledger

// The commit metadata: which offsets between the committed one and the
// highest finished one are finished, so that the next owner of the
// partition (after a crash, a rebalance or a restart) runs only what was
// not. docs/architecture.md ("Commit metadata") is the reference a person
// decodes it by hand from:
//
//	pf2:<base>:<count>:<u0>,<f0>,<u1>,<f1>,...:<tail>:<reading>:<crc>
//
//	base   the committed offset itself (decimal): the metadata speaks only of
//	       the commit it was written with, so one left behind by another
//	       client's commit is recognised and ignored
//	count  the offsets it speaks of: [base, base+count)
//	runs   alternating run lengths from base: u unfinished offsets, then f
//	       finished ones, then u, ...; the first run (unfinished) may be 0,
//	       every other run is at least 1, the last is finished, and they add
//	       up to count. Offsets the partition does not hold (compacted away,
//	       transaction markers) fall in finished runs: nothing will deliver
//	       them again.
//	tail   the fingerprint of the record at base+count-1, the last offset it
//	       speaks of (8 lowercase hex digits): ties the metadata to the
//	       log's history, so a log truncated and written again past the old
//	       end (an unclean leader election) is not resumed as done
//	reading how the offsets were read and run (the caller's token, such as
//	       "key.rc": ordering and isolation); a resume across a change of it
//	       would be wrong, so the caller compares it
//	crc    CRC-32C (Castagnoli) of everything before the last colon, 8
//	       lowercase hex digits
//
// Why runs of the unfinished: a partition never holds more than S records
// in flight, so an owner's own runs number at most 2 × S + 1 however far the
// finished offsets reach past a pinned record (until it has been handed
// them again, it also carries the runs its predecessor committed); in
// decimal they stay a few hundred bytes at the default S = 64, and no
// compression or base64 step pays for its obscurity at that size. When the encoding would pass the size limit it
// degrades, never blocks: it speaks of fewer offsets, dropping whole
// (unfinished, finished) pairs from the end, so the offsets it no longer
// covers are replayed. That is safe: the metadata only ever claims finished
// what was finished.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"strings"
)

// MetadataPrefix names the format of the commit metadata this package
// writes (version 2; version 1, without tail and reading, is foreign: its
// resume cannot be checked against the log).
const MetadataPrefix = "pf2:"

// maxReading bounds the reading token.
const maxReading = 32

// ErrForeignMetadata is returned by DecodeMetadata for metadata in no format
// of this package: empty, written by another client or a later version.
var ErrForeignMetadata = errors.New("ledger: commit metadata not in a known format")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Resume is what an earlier owner of a partition committed: offsets in
// [Base, End) not inside an unfinished interval are finished.
type Resume struct {
	Base, End int64
	// Tail is the fingerprint of the record at End-1, as the ledger that
	// wrote the metadata was told it (FinishRecord).
	Tail uint32
	// Reading is the token the writer set (SetReading).
	Reading string
	// unfinished are half-open intervals [from, to), ascending, disjoint,
	// inside [Base, End).
	unfinished []interval
	// cursor is the first interval not wholly below the last offset asked
	// about: offsets are asked about in ascending order.
	cursor int
}

type interval struct{ from, to int64 }

// Finished reports whether offset was finished by the earlier owner.
func (r *Resume) Finished(offset int64) bool {
	if offset < r.Base || offset >= r.End {
		return false
	}
	if r.cursor > 0 && r.unfinished[r.cursor-1].to > offset {
		r.cursor = 0 // asked out of order: start over
	}
	for r.cursor < len(r.unfinished) && r.unfinished[r.cursor].to <= offset {
		r.cursor++
	}
	return r.cursor == len(r.unfinished) || offset < r.unfinished[r.cursor].from
}

// FinishedCount returns how many offsets of [Base, End) are finished
// (holes included: offsets that hold no record).
func (r *Resume) FinishedCount() int64 {
	n := r.End - r.Base
	for _, iv := range r.unfinished {
		n -= iv.to - iv.from
	}
	return n
}

// Unfinished returns how many offsets of [Base, End) are unfinished.
func (r *Resume) Unfinished() int64 { return r.End - r.Base - r.FinishedCount() }

// Restore seeds an empty ledger with what the earlier owner committed: the
// offsets r says are finished are reported by Restored as they are admitted
// (the caller then finishes them without running them), and Commit keeps
// speaking of those not yet admitted, so a second crash before they come by
// again loses none of what the first owner finished. It fails once anything
// was admitted.
func (l *Ledger) Restore(r Resume) error {
	if l.admitted {
		return errors.New("ledger: Restore after the first Admit")
	}
	if r.End <= r.Base {
		return nil
	}
	l.restored = &r
	return nil
}

// Restored reports whether offset was finished by the earlier owner (see
// Restore). Ask in ascending order of offsets, as they are admitted.
func (l *Ledger) Restored(offset int64) bool {
	return l.restored != nil && l.restored.Finished(offset)
}

// Commit returns what to commit now: the watermark, and metadata speaking of
// the finished offsets above it, at most maxBytes long (see the format
// above). metadata is empty when no finished offset lies above the
// watermark, or when maxBytes leaves room for none. ok is false before the
// first admission: there is nothing to commit.
func (l *Ledger) Commit(maxBytes int) (offset int64, metadata string, ok bool) {
	wm, ok := l.Watermark()
	if !ok {
		return 0, "", false
	}
	end, tail := l.highestFinished+1, l.tail
	r := l.restored
	if r != nil && l.last >= r.End-1 {
		// Every offset it speaks of was admitted: the ledger knows them itself.
		l.restored, r = nil, nil
	}
	if r != nil && r.End > end {
		end, tail = r.End, r.Tail
	}
	if end <= wm {
		return wm, "", true
	}
	runs := l.runs(wm, end)
	return wm, l.encode(wm, runs, tail, maxBytes), true
}

// runs returns the alternating run lengths of [wm, end): unfinished first.
// Offsets up to the last admitted one are the ledger's; those after it, the
// restored metadata's.
func (l *Ledger) runs(wm, end int64) []int64 {
	runs := l.scratch[:0]
	cur := wm // end of the runs so far
	add := func(from, to int64) {
		switch {
		case len(runs) == 0 && from == wm:
			runs = append(runs, to-from)
		case len(runs) == 0:
			runs = append(runs, 0, from-wm, to-from)
		case from == cur:
			runs[len(runs)-1] += to - from
		default:
			runs = append(runs, from-cur, to-from)
		}
		cur = to
	}
	l.unfinished(func(o int64) {
		if o < end {
			add(o, o+1)
		}
	})
	if r := l.restored; r != nil {
		// Intervals before the cursor lie below an offset already admitted:
		// the ledger's own entries speak for them.
		for _, iv := range r.unfinished[r.cursor:] {
			from, to := max(iv.from, l.last+1, wm), min(iv.to, end)
			if from < to {
				add(from, to)
			}
		}
	}
	if len(runs) == 0 {
		runs = append(runs, 0)
	}
	runs = append(runs, end-cur) // the last run is finished: end-1 is
	l.scratch = runs
	return runs
}

// encode writes base, runs, tail and the reading in the format above,
// dropping whole pairs from the end until it fits in maxBytes; "" when not
// even one fits. Dropping pairs moves the last offset spoken of, so tail
// speaks of the full runs only: a shortened encoding names no tail it
// cannot vouch for and carries 00000000, which a resume then fails to match
// (the offsets are replayed, which is safe).
func (l *Ledger) encode(base int64, runs []int64, tail uint32, maxBytes int) string {
	// fixed: prefix, base, five colons, the tail, the reading, the crc
	fixed := len(MetadataPrefix) + digits(base) + 5 + 8 + len(l.reading) + 8
	pairs, size, count := 0, 0, int64(0)
	for k := 0; k+1 < len(runs); k += 2 {
		add := digits(runs[k]) + digits(runs[k+1]) + 2 // two numbers, two commas
		c := count + runs[k] + runs[k+1]
		if fixed+digits(c)+size+add-1 > maxBytes { // the first number has no comma
			break
		}
		pairs, size, count = pairs+1, size+add, c
	}
	if pairs == 0 {
		return ""
	}
	if 2*pairs < len(runs) {
		tail = 0
	}
	b := append(l.buf[:0], MetadataPrefix...)
	b = strconv.AppendInt(b, base, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, count, 10)
	b = append(b, ':')
	for i, r := range runs[:2*pairs] {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, r, 10)
	}
	b = fmt.Appendf(b, ":%08x:", tail)
	b = append(b, l.reading...)
	sum := crc32.Checksum(b, castagnoli)
	b = append(b, ':')
	b = fmt.Appendf(b, "%08x", sum)
	l.buf = b
	return string(b)
}

func digits(v int64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// DecodeMetadata reads commit metadata written by Commit. It returns
// ErrForeignMetadata for metadata in no format of this package, and another
// error for metadata in this format that is damaged; either way the caller
// replays everything above the committed offset, which is safe. A Resume it
// returns never speaks of an offset outside [Base, End).
func DecodeMetadata(metadata string) (Resume, error) {
	body, ok := strings.CutPrefix(metadata, MetadataPrefix)
	if !ok {
		return Resume{}, ErrForeignMetadata
	}
	cut := strings.LastIndexByte(metadata, ':')
	if cut < len(MetadataPrefix) || len(metadata)-cut-1 != 8 {
		return Resume{}, errors.New("ledger: commit metadata has no checksum")
	}
	sum, err := strconv.ParseUint(metadata[cut+1:], 16, 32)
	if err != nil || metadata[cut+1:] != fmt.Sprintf("%08x", sum) {
		return Resume{}, errors.New("ledger: commit metadata checksum is not 8 lowercase hex digits")
	}
	if crc32.Checksum([]byte(metadata[:cut]), castagnoli) != uint32(sum) {
		return Resume{}, errors.New("ledger: commit metadata checksum does not match")
	}
	fields := strings.Split(body[:cut-len(MetadataPrefix)], ":")
	if len(fields) != 5 {
		return Resume{}, fmt.Errorf("ledger: commit metadata has %d fields, want base, count, runs, tail and reading", len(fields))
	}
	tail, err := strconv.ParseUint(fields[3], 16, 32)
	if err != nil || fields[3] != fmt.Sprintf("%08x", tail) {
		return Resume{}, errors.New("ledger: commit metadata tail is not 8 lowercase hex digits")
	}
	if !validReading(fields[4]) {
		return Resume{}, fmt.Errorf("ledger: commit metadata reading %q is not a token", fields[4])
	}
	base, err := parseCount(fields[0])
	if err != nil {
		return Resume{}, fmt.Errorf("ledger: commit metadata base: %w", err)
	}
	count, err := parseCount(fields[1])
	if err != nil {
		return Resume{}, fmt.Errorf("ledger: commit metadata count: %w", err)
	}
	if count < 1 || base > math.MaxInt64-count {
		return Resume{}, fmt.Errorf("ledger: commit metadata count %d out of range", count)
	}
	texts := strings.Split(fields[2], ",")
	if len(texts)%2 != 0 {
		return Resume{}, errors.New("ledger: commit metadata runs are not (unfinished, finished) pairs")
	}
	r := Resume{Base: base, End: base + count, Tail: uint32(tail), Reading: fields[4]}
	at := base
	for i, t := range texts {
		n, err := parseCount(t)
		if err != nil {
			return Resume{}, fmt.Errorf("ledger: commit metadata run %d: %w", i, err)
		}
		if n == 0 && i > 0 {
			return Resume{}, fmt.Errorf("ledger: commit metadata run %d is empty", i)
		}
		if n > r.End-at {
			return Resume{}, fmt.Errorf("ledger: commit metadata runs pass the count %d", count)
		}
		if i%2 == 0 && n > 0 {
			r.unfinished = append(r.unfinished, interval{at, at + n})
		}
		at += n
	}
	if at != r.End {
		return Resume{}, fmt.Errorf("ledger: commit metadata runs add up to %d, not the count %d", at-base, count)
	}
	return r, nil
}

// parseCount parses a non-negative decimal without sign or leading zeros.
func parseCount(s string) (int64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal count", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

// validReading reports whether s may be a reading token: at most maxReading
// characters of a-z, 0-9, '.' and '-' (no colon: it is a field).
func validReading(s string) bool {
	if len(s) > maxReading {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// SetReading sets the token the metadata carries to say how the offsets
// were read and run (see the format above). It fails for a token that is
// not one.
func (l *Ledger) SetReading(reading string) error {
	if !validReading(reading) {
		return fmt.Errorf("ledger: reading %q: want at most %d of a-z, 0-9, '.', '-'", reading, maxReading)
	}
	l.reading = reading
	return nil
}
