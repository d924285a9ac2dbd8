package ledger

// The commit metadata: which offsets between the committed one and the
// highest finished one are finished, so that the next owner of the
// partition (after a crash, a rebalance or a restart) runs only what was
// not. docs/architecture.md ("Commit metadata") is the reference a person
// decodes it by hand from:
//
//	pf3:<base>:<count>:<u0>,<f0>,<u1>,<f1>,...:<first>:<lead>:<tail>:<reading>:<crc>
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
//	first  the lowest offset of [base, base+count) whose record the writer
//	       finished (decimal): the first record a resume skips. It lies in a
//	       finished run; it may be base itself when u0 is 0
//	lead   the fingerprint of the record at first (8 lowercase hex digits)
//	tail   the fingerprint of the record at base+count-1, the last offset it
//	       speaks of (8 lowercase hex digits). lead and tail tie the
//	       metadata to the log's history, so a log truncated and written
//	       again past the old end (an unclean leader election) is not
//	       resumed as done unless the records at both offsets are as they
//	       were. 00000000 is unknown: the writer had not fingerprinted that
//	       record, and a resume refuses the metadata (an unknown lead is
//	       written with first = base+count-1)
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
// compression or base64 step pays for its obscurity at that size. When the
// encoding would pass the size limit it degrades, never blocks: it speaks
// of fewer offsets, dropping whole (unfinished, finished) pairs from the
// end, so the offsets it no longer covers are replayed. That is safe: the
// metadata only ever claims finished what was finished.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"strings"
)

// MetadataPrefix names the format of the commit metadata this package
// writes (version 3). Versions 1 (without tail and reading) and 2 (a tail
// but no first and lead) are foreign: a resume from them cannot be checked
// against the log, or only against one record.
const MetadataPrefix = "pf3:"

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
	// First is the lowest offset in [Base, End) whose record the writer
	// finished, the first record a resume skips; it is finished. Lead is
	// that record's fingerprint, and Tail the fingerprint of the record at
	// End-1, as the ledger that wrote the metadata was told them
	// (FinishRecord). 0 is unknown (and First is then End-1): a resume
	// must not trust metadata with either unknown.
	First      int64
	Lead, Tail uint32
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
	// The lead: the lowest record finished above the watermark. When this
	// ledger finished none there and was handed offsets up to the earlier
	// owner's first already, it is one the earlier owner finished and this
	// ledger has not been handed yet, which it knows by no fingerprint: the
	// lead stays 0, unknown, and the metadata is not resumed from until a
	// record above the watermark finishes here.
	first, lead, known := l.lowestFinished()
	r := l.restored
	if r != nil && l.last >= r.End-1 {
		// Every offset it speaks of was admitted: the ledger knows them itself.
		l.restored, r = nil, nil
	}
	if r != nil && r.End > end {
		end, tail = r.End, r.Tail
	}
	if r != nil && !known && r.First > l.last {
		// Not handed over yet: still the lowest (what was handed over that
		// it called finished was finished here as it came).
		first, lead = r.First, r.Lead
	}
	if end <= wm {
		return wm, "", true
	}
	runs := l.runs(wm, end)
	return wm, l.encode(wm, runs, first, lead, tail, maxBytes), true
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

// encode writes base, runs, first, lead, tail and the reading in the format
// above, dropping whole pairs from the end until it fits in maxBytes; ""
// when not even one fits. Dropping pairs moves the last offset spoken of,
// so the fingerprints speak of the full runs only: a shortened encoding
// names no record it cannot vouch for and carries 00000000 for both, which
// a resume then refuses (the offsets are replayed, which is safe). An
// unknown lead is written with the last offset as its first.
func (l *Ledger) encode(base int64, runs []int64, first int64, lead, tail uint32, maxBytes int) string {
	// fixed: prefix, base, seven colons, lead, tail, the reading, the crc
	fixed := len(MetadataPrefix) + digits(base) + 7 + 8 + 8 + len(l.reading) + 8
	// Sizes grow with the pairs kept, but for the full encoding's first,
	// which may have fewer digits than the last offset a shortened one
	// writes in its place: keep the most pairs that fit rather than stop at
	// the first that does not.
	pairs, count, size, c := 0, int64(0), 0, int64(0)
	for k := 0; k+1 < len(runs); k += 2 {
		size += digits(runs[k]) + digits(runs[k+1]) + 2 // two numbers, two commas
		c += runs[k] + runs[k+1]
		at := base + c - 1
		if k+2 == len(runs) && lead != 0 {
			at = first
		}
		if fixed+digits(c)+digits(at)+size-1 <= maxBytes { // the first number has no comma
			pairs, count = k/2+1, c
		}
	}
	if pairs == 0 {
		return ""
	}
	if 2*pairs < len(runs) {
		lead, tail = 0, 0
	}
	if lead == 0 {
		first = base + count - 1
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
	b = append(b, ':')
	b = strconv.AppendInt(b, first, 10)
	b = fmt.Appendf(b, ":%08x:%08x:", lead, tail)
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
	if len(fields) != 7 {
		return Resume{}, fmt.Errorf("ledger: commit metadata has %d fields, want base, count, runs, first, lead, tail and reading", len(fields))
	}
	lead, err := parsePrint(fields[4])
	if err != nil {
		return Resume{}, fmt.Errorf("ledger: commit metadata lead: %w", err)
	}
	tail, err := parsePrint(fields[5])
	if err != nil {
		return Resume{}, fmt.Errorf("ledger: commit metadata tail: %w", err)
	}
	if !validReading(fields[6]) {
		return Resume{}, fmt.Errorf("ledger: commit metadata reading %q is not a token", fields[6])
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
	first, err := parseCount(fields[3])
	if err != nil {
		return Resume{}, fmt.Errorf("ledger: commit metadata first: %w", err)
	}
	r := Resume{Base: base, End: base + count, First: first, Lead: lead, Tail: tail, Reading: fields[6]}
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
	if first < r.Base || first >= r.End || !r.Finished(first) {
		return Resume{}, fmt.Errorf("ledger: commit metadata first %d is not a finished offset of [%d, %d)", first, r.Base, r.End)
	}
	r.cursor = 0
	return r, nil
}

// parsePrint parses a fingerprint: 8 lowercase hex digits.
func parsePrint(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || s != fmt.Sprintf("%08x", v) {
		return 0, fmt.Errorf("%q is not 8 lowercase hex digits", s)
	}
	return uint32(v), nil
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
