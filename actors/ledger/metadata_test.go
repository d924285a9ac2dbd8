package ledger_test

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/ledger"
)

// metaModel is a partition as the metadata must describe it: which offsets
// exist (were delivered), which of those are finished.
type metaModel struct {
	model
	exists map[int64]bool
}

// fpOf is the fingerprint the tests give the record at offset o: never 0
// (which the metadata reads as unknown), and another for every offset, so
// a fingerprint named for the wrong offset shows.
func fpOf(o int64) uint32 {
	return crc32.ChecksumIEEE(strconv.AppendInt(nil, o, 10)) | 1
}

// drive admits and finishes at random, as a partition actor would.
func drive(t *rapid.T, l *ledger.Ledger, m *metaModel, next *int64, steps int, label string) {
	for s := 0; s < steps; s++ {
		open := m.unfinished()
		if len(open) == 0 || rapid.Bool().Draw(t, label+"admit") {
			*next += rapid.Int64Range(1, 4).Draw(t, label+"gap")
			if err := l.Admit(*next); err != nil {
				t.Fatalf("admit %d: %v", *next, err)
			}
			m.admitted = append(m.admitted, *next)
			m.exists[*next] = true
			continue
		}
		o := rapid.SampledFrom(open).Draw(t, label+"finish")
		if _, err := l.FinishRecord(o, fpOf(o)); err != nil {
			t.Fatalf("finish %d: %v", o, err)
		}
		m.finished[o] = true
	}
}

// checkSound decodes what l commits and fails when it calls finished an
// offset that was admitted and that no owner (model) finished, or names a
// fingerprint it cannot vouch for: a known lead must be the fingerprint of
// the lowest offset that holds a record and that the metadata calls
// finished (the first record a resume skips), a known tail that of the
// record at its last offset; metadata shortened to fit maxBytes names
// neither.
func checkSound(t *rapid.T, l *ledger.Ledger, maxBytes int, ms ...*metaModel) (ledger.Resume, bool) {
	_, full, _ := l.Commit(1 << 20)
	wm, meta, ok := l.Commit(maxBytes)
	if !ok {
		t.Fatalf("Commit not ok after admissions")
	}
	if len(meta) > maxBytes {
		t.Fatalf("metadata of %d bytes passes the limit %d: %q", len(meta), maxBytes, meta)
	}
	if meta == "" {
		return ledger.Resume{}, false
	}
	r, err := ledger.DecodeMetadata(meta)
	if err != nil {
		t.Fatalf("decode of our own metadata %q: %v", meta, err)
	}
	if r.Base != wm {
		t.Fatalf("metadata base %d, committed offset %d", r.Base, wm)
	}
	exists := func(o int64) (exists, finished bool) {
		for _, m := range ms {
			exists, finished = exists || m.exists[o], finished || m.finished[o]
		}
		return exists, finished
	}
	skipped := int64(-1) // the lowest offset holding a record that it calls finished
	for o := r.Base; o < r.End; o++ {
		if !r.Finished(o) {
			continue
		}
		exists, finished := exists(o)
		if exists && !finished {
			t.Fatalf("metadata %q calls offset %d finished; it was admitted and never finished", meta, o)
		}
		if exists && skipped < 0 {
			skipped = o
		}
	}
	if r.Lead != 0 && (r.First != skipped || r.Lead != fpOf(skipped)) {
		t.Fatalf("metadata %q names %d with %08x as its first; the first record it skips is %d, fingerprint %08x", meta, r.First, r.Lead, skipped, fpOf(skipped))
	}
	if r.Lead == 0 && r.First != r.End-1 {
		t.Fatalf("metadata %q names an unknown lead at %d, not at its last offset", meta, r.First)
	}
	if last, _ := exists(r.End - 1); r.Tail != 0 && (!last || r.Tail != fpOf(r.End-1)) {
		t.Fatalf("metadata %q names %08x as the tail at %d (a record there: %v); want %08x", meta, r.Tail, r.End-1, last, fpOf(r.End-1))
	}
	if meta != full && (r.Lead != 0 || r.Tail != 0) {
		t.Fatalf("metadata %q, shortened from %q, names fingerprints", meta, full)
	}
	return r, true
}

// TestMetadataRoundTrip: for every state the ledger can reach, the metadata
// it commits decodes to exactly its finished offsets above the watermark
// (offsets that hold no record count as finished) and to nothing past the
// highest finished one; under a size limit it only ever leaves offsets out.
func TestMetadataRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := ledger.New(rapid.IntRange(1, 8).Draw(t, "capacity"))
		m := &metaModel{model: model{finished: map[int64]bool{}}, exists: map[int64]bool{}}
		next := rapid.Int64Range(-1, 1<<50).Draw(t, "start")
		drive(t, l, m, &next, rapid.IntRange(1, 200).Draw(t, "steps"), "")

		r, ok := checkSound(t, l, 1<<20, m)
		wm, _ := l.Watermark()
		var highest int64 = -1
		lowest := int64(-1) // the lowest finished above the watermark
		for o := range m.finished {
			highest = max(highest, o)
			if o > wm && (lowest < 0 || o < lowest) {
				lowest = o
			}
		}
		if highest < wm {
			if ok {
				t.Fatalf("metadata with nothing finished above the watermark %d", wm)
			}
			return
		}
		if !ok || r.End != highest+1 {
			t.Fatalf("metadata ends at %d (ok %v), want one past the highest finished %d", r.End, ok, highest)
		}
		// One owner fingerprinted every record it finished: both are known.
		if r.First != lowest || r.Lead != fpOf(lowest) || r.Tail != fpOf(highest) {
			t.Fatalf("metadata names %d with %08x and the tail %08x; want %d with %08x and %08x", r.First, r.Lead, r.Tail, lowest, fpOf(lowest), fpOf(highest))
		}
		for o := wm; o <= highest; o++ {
			if want := !m.exists[o] || m.finished[o]; r.Finished(o) != want {
				t.Fatalf("offset %d: decoded finished=%v, want %v", o, r.Finished(o), want)
			}
		}
		if r.Finished(wm-1) || r.Finished(highest+1) {
			t.Fatal("decoded metadata speaks of offsets outside its range")
		}

		limit := rapid.IntRange(0, 200).Draw(t, "maxBytes")
		checkSound(t, l, limit, m)
	})
}

// TestMetadataSurvivesASecondOwner: a new owner restores the metadata, is
// handed the same offsets again (and perhaps more), and crashes at a random
// moment. What it commits must never call finished an offset neither owner
// finished, and, until it has been handed them again, must keep speaking of
// what the first owner finished. Its lead is known unless it has finished
// no record above its watermark and was handed the first owner's first
// already (the lowest finished record above its watermark is then one it
// has not been handed, whose fingerprint it does not know).
func TestMetadataSurvivesASecondOwner(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		first := ledger.New(4)
		m1 := &metaModel{model: model{finished: map[int64]bool{}}, exists: map[int64]bool{}}
		next := rapid.Int64Range(0, 1000).Draw(t, "start")
		drive(t, first, m1, &next, rapid.IntRange(1, 150).Draw(t, "steps"), "first ")
		r, ok := checkSound(t, first, 1<<20, m1)
		if !ok {
			return
		}
		base := r.Base

		second := ledger.New(4)
		if err := second.Restore(r); err != nil {
			t.Fatal(err)
		}
		m2 := &metaModel{model: model{finished: map[int64]bool{}}, exists: map[int64]bool{}}
		// Redeliver what exists from the committed offset on, then new offsets.
		var redeliver []int64
		for _, o := range m1.admitted {
			if o >= base {
				redeliver = append(redeliver, o)
			}
		}
		handed := rapid.IntRange(0, len(redeliver)).Draw(t, "handed")
		for _, o := range redeliver[:handed] {
			restored := second.Restored(o)
			if restored && !m1.finished[o] {
				t.Fatalf("restored offset %d as finished; the first owner never finished it", o)
			}
			if err := second.Admit(o); err != nil {
				t.Fatal(err)
			}
			m2.admitted = append(m2.admitted, o)
			m2.exists[o] = true
			if restored {
				if _, err := second.FinishRecord(o, fpOf(o)); err != nil {
					t.Fatal(err)
				}
				m2.finished[o] = true
			} else if rapid.Bool().Draw(t, "finish now") {
				if _, err := second.FinishRecord(o, fpOf(o)); err != nil {
					t.Fatal(err)
				}
				m2.finished[o] = true
			}
		}
		if handed == 0 {
			return // nothing admitted: nothing to commit, the first owner's commit stands
		}
		if handed == len(redeliver) {
			next = max(next, redeliver[handed-1])
			drive(t, second, m2, &next, rapid.IntRange(0, 50).Draw(t, "more"), "second ")
		}
		r2, ok2 := checkSound(t, second, 1<<20, m1, m2)
		last, _ := second.Last()
		for o := last + 1; o < r.End; o++ {
			if r.Finished(o) && !(ok2 && r2.Finished(o)) {
				t.Fatalf("offset %d, finished by the first owner and not handed to the second yet, forgotten by its commit", o)
			}
		}
		if !ok2 {
			return
		}
		wm2, _ := second.Watermark()
		own := false // the second owner finished a record above its watermark
		for o := range m2.finished {
			own = own || o > wm2
		}
		if known := own || r.First > last; (r2.Lead != 0) != known || r2.Tail == 0 {
			t.Fatalf("the second owner's lead %08x (tail %08x); want it known: %v (finished above %d itself: %v; the first owner's first %d, handed up to %d)",
				r2.Lead, r2.Tail, known, wm2, own, r.First, last)
		}
	})
}

// TestMetadataFormat pins the format documented in docs/architecture.md:
// committed at 1200; 1200, 1203 and 1204 unfinished; 1201, 1202 and
// 1205-1300 finished, the record at 1201 fingerprinted 04b1beef and the one
// at 1300 0514beef, read in key order under read_committed.
func TestMetadataFormat(t *testing.T) {
	l := ledger.New(8)
	if err := l.SetReading("key.rc"); err != nil {
		t.Fatal(err)
	}
	for o := int64(1200); o <= 1300; o++ {
		if err := l.Admit(o); err != nil {
			t.Fatal(err)
		}
	}
	for o := int64(1201); o <= 1300; o++ {
		if o == 1203 || o == 1204 {
			continue
		}
		if _, err := l.FinishRecord(o, uint32(o)<<16|0xbeef); err != nil {
			t.Fatal(err)
		}
	}
	wm, meta, _ := l.Commit(4096)
	body := "pf3:1200:101:1,2,2,96:1201:04b1beef:0514beef:key.rc"
	want := fmt.Sprintf("%s:%08x", body, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
	if wm != 1200 || meta != want {
		t.Fatalf("Commit = %d, %q; want 1200, %q", wm, meta, want)
	}
	if want != "pf3:1200:101:1,2,2,96:1201:04b1beef:0514beef:key.rc:ba7eabdf" {
		t.Fatalf("the documented example's checksum changed: %s", want)
	}
	// Finishing the head moves the watermark to 1203: 1205-1300 stay
	// finished, and 1205 is now the first record a resume would skip.
	if _, err := l.Finish(1200); err != nil {
		t.Fatal(err)
	}
	if wm, meta, _ := l.Commit(4096); wm != 1203 || !strings.HasPrefix(meta, "pf3:1203:98:2,96:1205:04b5beef:0514beef:key.rc:") {
		t.Fatalf("after the head finished: %d, %q", wm, meta)
	}
	// A limit too small for one pair degrades to no metadata.
	if _, meta, _ := l.Commit(20); meta != "" {
		t.Fatalf("Commit(20) = %q, want no metadata", meta)
	}
}

// TestMetadataDegradesToFewerOffsets: when the runs do not fit, the
// metadata speaks of a prefix of the span, whole pairs at a time.
func TestMetadataDegradesToFewerOffsets(t *testing.T) {
	l := ledger.New(8)
	// 0..999 admitted, the even ones finished: 500 pairs of runs "1,1".
	for o := int64(0); o < 1000; o++ {
		_ = l.Admit(o)
	}
	for o := int64(2); o < 1000; o += 2 {
		_, _ = l.Finish(o)
	}
	_, full, _ := l.Commit(1 << 20)
	_, short, _ := l.Commit(100)
	if len(short) > 100 || len(short) < 80 {
		t.Fatalf("metadata under a 100-byte limit is %d bytes: %q", len(short), short)
	}
	rf, err := ledger.DecodeMetadata(full)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ledger.DecodeMetadata(short)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Base != rf.Base || rs.End >= rf.End || rs.End <= rs.Base {
		t.Fatalf("short metadata covers [%d, %d), the full one [%d, %d)", rs.Base, rs.End, rf.Base, rf.End)
	}
	for o := rs.Base; o < rs.End; o++ {
		if rs.Finished(o) != rf.Finished(o) {
			t.Fatalf("offset %d: short says %v, full says %v", o, rs.Finished(o), rf.Finished(o))
		}
	}
}

func TestDecodeMetadataRejects(t *testing.T) {
	valid := func(body string) string {
		return fmt.Sprintf("%s:%08x", body, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
	}
	const ok = "pf3:10:5:1,4:11:0000002b:0000002a:key.rc"
	if _, err := ledger.DecodeMetadata(valid(ok)); err != nil {
		t.Fatalf("the cases below are mutations of %q, which does not decode: %v", valid(ok), err)
	}
	for _, tc := range []struct {
		name, meta string
		foreign    bool
	}{
		{"empty", "", true},
		{"another client", "consumer-7 state", true},
		{"version 1, no history to check", valid("pf1:10:5:1,4"), true},
		{"version 2, one record to check", valid("pf2:10:5:1,4:0000002a:key.rc"), true},
		{"a later version", valid("pf4:10:5:1,4:11:0000002b:0000002a:key.rc"), true},
		{"no checksum", ok, false},
		{"checksum wrong", ok + ":00000000", false},
		{"checksum upper case", ok + ":" + strings.ToUpper(valid(ok)[len(ok)+1:]), false},
		{"checksum short", ok + ":abc", false},
		{"too few fields", valid("pf3:10:5:1,4:11:0000002b:0000002a"), false},
		{"too many fields", valid(ok + ":7"), false},
		{"first below the base", valid("pf3:10:5:1,4:9:0000002b:0000002a:key.rc"), false},
		{"first unfinished", valid("pf3:10:5:1,4:10:0000002b:0000002a:key.rc"), false},
		{"first at the end", valid("pf3:10:5:1,4:15:0000002b:0000002a:key.rc"), false},
		{"first not a number", valid("pf3:10:5:1,4:1x:0000002b:0000002a:key.rc"), false},
		{"first with a leading zero", valid("pf3:10:5:1,4:011:0000002b:0000002a:key.rc"), false},
		{"first empty", valid("pf3:10:5:1,4::0000002b:0000002a:key.rc"), false},
		{"lead short", valid("pf3:10:5:1,4:11:2b:0000002a:key.rc"), false},
		{"lead upper case", valid("pf3:10:5:1,4:11:0000002B:0000002a:key.rc"), false},
		{"tail short", valid("pf3:10:5:1,4:11:0000002b:2a:key.rc"), false},
		{"tail upper case", valid("pf3:10:5:1,4:11:0000002b:0000002A:key.rc"), false},
		{"reading not a token", valid("pf3:10:5:1,4:11:0000002b:0000002a:Key rc"), false},
		{"reading too long", valid("pf3:10:5:1,4:11:0000002b:0000002a:" + strings.Repeat("k", 33)), false},
		{"odd runs", valid("pf3:10:5:1,3,1:11:0000002b:0000002a:key.rc"), false},
		{"runs short of the count", valid("pf3:10:6:1,4:11:0000002b:0000002a:key.rc"), false},
		{"runs past the count", valid("pf3:10:4:1,4:11:0000002b:0000002a:key.rc"), false},
		{"an empty run after the first", valid("pf3:10:5:1,0,0,4:11:0000002b:0000002a:key.rc"), false},
		{"zero count", valid("pf3:10:0:0,0:10:0000002b:0000002a:key.rc"), false},
		{"negative base", valid("pf3:-10:5:1,4:11:0000002b:0000002a:key.rc"), false},
		{"plus sign", valid("pf3:+10:5:1,4:11:0000002b:0000002a:key.rc"), false},
		{"leading zero", valid("pf3:010:5:1,4:11:0000002b:0000002a:key.rc"), false},
		{"base overflow", valid("pf3:9223372036854775807:5:1,4:11:0000002b:0000002a:key.rc"), false},
		{"base out of int64", valid("pf3:99999999999999999999:5:1,4:11:0000002b:0000002a:key.rc"), false},
		{"not a number", valid("pf3:10:5:1,x:11:0000002b:0000002a:key.rc"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ledger.DecodeMetadata(tc.meta)
			if err == nil {
				t.Fatalf("DecodeMetadata(%q) accepted it", tc.meta)
			}
			if errors.Is(err, ledger.ErrForeignMetadata) != tc.foreign {
				t.Fatalf("DecodeMetadata(%q) = %v; foreign %v wanted", tc.meta, err, tc.foreign)
			}
		})
	}
	r, err := ledger.DecodeMetadata(valid("pf3:10:5:0,5:10:0000002b:0000002a:"))
	if err != nil || r.Base != 10 || r.End != 15 || !r.Finished(10) || r.Unfinished() != 0 || r.First != 10 || r.Lead != 43 || r.Tail != 42 || r.Reading != "" {
		t.Fatalf("a first run of 0 unfinished: %+v, %v", r, err)
	}
}

// FuzzDecodeMetadata: malformed metadata never panics, and what decodes
// never speaks of an offset outside the range it states.
func FuzzDecodeMetadata(f *testing.F) {
	for _, seed := range []string{
		"", "pf3:", "pf3:1200:101:1,2,2,96:1201:04b1beef:0514beef:key.rc:ba7eabdf", "pf3:0:1:0,1:0:00000000:00000000::00000000",
		"pf3:10:5:1,4:14:00000000:00000000:x:ffffffff", "pf3:9223372036854775806:1:0,1:9223372036854775806:00000001:00000001:a:12345678",
		"pf3::::::::", "pf3:1:2:3,4,5:6:7:8:9:a",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, meta string) {
		r, err := ledger.DecodeMetadata(meta)
		if err != nil {
			return
		}
		if r.End <= r.Base || r.Base < 0 {
			t.Fatalf("%q decoded to the range [%d, %d)", meta, r.Base, r.End)
		}
		if r.Finished(r.Base-1) || r.Finished(r.End) {
			t.Fatalf("%q speaks of offsets outside [%d, %d)", meta, r.Base, r.End)
		}
		if r.FinishedCount() < 1 || r.FinishedCount() > r.End-r.Base {
			t.Fatalf("%q: %d finished of %d", meta, r.FinishedCount(), r.End-r.Base)
		}
		if r.First < r.Base || r.First >= r.End || !r.Finished(r.First) {
			t.Fatalf("%q names %d, not a finished offset of [%d, %d), as its first", meta, r.First, r.Base, r.End)
		}
		// The intervals agree with the answers, offset by offset.
		if r.End-r.Base <= 1<<16 {
			var n int64
			for o := r.Base; o < r.End; o++ {
				if r.Finished(o) {
					n++
				}
			}
			if n != r.FinishedCount() {
				t.Fatalf("%q: %d offsets answer finished, FinishedCount says %d", meta, n, r.FinishedCount())
			}
		}
	})
}

// TestMetadataTailIsTheLastOffsetsRecord: the tail names the fingerprint of
// the record at the last offset the metadata speaks of: the ledger's own
// highest finished, or the restored metadata's end while that lies further;
// and no tail at all (00000000) once the encoding had to drop offsets, since
// the fingerprint of the new last offset is not known.
func TestMetadataTailIsTheLastOffsetsRecord(t *testing.T) {
	l := ledger.New(8)
	for o := int64(0); o < 6; o++ {
		_ = l.Admit(o)
	}
	for _, o := range []int64{4, 2, 3} { // 3 finishes last but 4 is the highest
		_, _ = l.FinishRecord(o, uint32(100+o))
	}
	_, meta, _ := l.Commit(4096)
	if r, err := ledger.DecodeMetadata(meta); err != nil || r.End != 5 || r.Tail != 104 {
		t.Fatalf("own commit %q: %+v, %v; want the end 5 and the tail of 4 (104)", meta, r, err)
	}

	// The next owner restores it and has not been handed 4 again: its commit
	// still speaks of 4, with 4's fingerprint.
	r, _ := ledger.DecodeMetadata(meta)
	next := ledger.New(8)
	_ = next.Restore(r)
	_ = next.Admit(0)
	_ = next.Admit(1)
	_, _ = next.FinishRecord(1, 201)
	_, meta2, _ := next.Commit(4096)
	if r2, err := ledger.DecodeMetadata(meta2); err != nil || r2.End != 5 || r2.Tail != 104 {
		t.Fatalf("restored commit %q: %+v, %v; want the end 5 and the restored tail 104", meta2, r2, err)
	}

	// Degraded: 0..999 with every even one finished does not fit in 100 bytes.
	d := ledger.New(8)
	for o := int64(0); o < 1000; o++ {
		_ = d.Admit(o)
	}
	for o := int64(2); o < 1000; o += 2 {
		_, _ = d.FinishRecord(o, 7)
	}
	_, full, _ := d.Commit(1 << 20)
	_, short, _ := d.Commit(100)
	rf, _ := ledger.DecodeMetadata(full)
	rs, err := ledger.DecodeMetadata(short)
	if err != nil || rf.Tail != 7 || rs.Tail != 0 || rs.End >= rf.End {
		t.Fatalf("full tail %d (want 7), degraded tail %d (want 0), ends %d/%d, %v", rf.Tail, rs.Tail, rs.End, rf.End, err)
	}
}

// TestMetadataRefusesAnyCorruption: metadata the ledger wrote, damaged in
// the ways the checksum or the format catch without fail, never decodes:
// cut short anywhere (the checksum field or the field count no longer
// fits), lengthened, up to four consecutive bytes overwritten (a burst of
// at most 32 bits, which CRC-32C always detects), or two neighbouring bytes
// swapped (a burst of at most 16).
func TestMetadataRefusesAnyCorruption(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := ledger.New(rapid.IntRange(1, 8).Draw(t, "capacity"))
		if err := l.SetReading(rapid.SampledFrom([]string{"", "key.rc", "unordered.ru"}).Draw(t, "reading")); err != nil {
			t.Fatal(err)
		}
		m := &metaModel{model: model{finished: map[int64]bool{}}, exists: map[int64]bool{}}
		next := rapid.Int64Range(-1, 1<<50).Draw(t, "start")
		drive(t, l, m, &next, rapid.IntRange(1, 100).Draw(t, "steps"), "")
		_, meta, _ := l.Commit(rapid.IntRange(40, 400).Draw(t, "maxBytes"))
		if meta == "" {
			return
		}
		if _, err := ledger.DecodeMetadata(meta); err != nil {
			t.Fatalf("the metadata as written, %q, does not decode: %v", meta, err)
		}
		var damaged string
		switch how := rapid.IntRange(0, 3).Draw(t, "how"); how {
		case 0:
			damaged = meta[:rapid.IntRange(0, len(meta)-1).Draw(t, "cut")]
		case 1:
			damaged = meta + rapid.StringN(1, 12, -1).Draw(t, "more")
		case 2:
			at := rapid.IntRange(0, len(meta)-1).Draw(t, "at")
			n := rapid.IntRange(1, min(4, len(meta)-at)).Draw(t, "n")
			b := []byte(meta)
			for i := at; i < at+n; i++ {
				b[i] = rapid.Byte().Draw(t, "byte")
			}
			damaged = string(b)
		case 3:
			at := rapid.IntRange(0, len(meta)-2).Draw(t, "at")
			b := []byte(meta)
			b[at], b[at+1] = b[at+1], b[at]
			damaged = string(b)
		}
		if damaged == meta {
			return // overwritten with what was there: no damage
		}
		if r, err := ledger.DecodeMetadata(damaged); err == nil {
			t.Fatalf("%q, damaged from %q, decodes: %+v", damaged, meta, r)
		}
	})
}

// TestMetadataLeadIsTheFirstSkippedRecord: the lead names the lowest
// record finished above the watermark when the finished entries around it
// were compacted away, when the watermark moves past it, and after a
// handover; a new owner that was handed its predecessor's first and has no
// record of its own finished above its watermark names the lead unknown
// (00000000, at the last offset), until one finishes.
func TestMetadataLeadIsTheFirstSkippedRecord(t *testing.T) {
	decode := func(l *ledger.Ledger) (int64, ledger.Resume) {
		t.Helper()
		wm, meta, _ := l.Commit(4096)
		r, err := ledger.DecodeMetadata(meta)
		if err != nil {
			t.Fatalf("decode %q: %v", meta, err)
		}
		return wm, r
	}
	finish := func(l *ledger.Ledger, offsets ...int64) {
		t.Helper()
		for _, o := range offsets {
			if _, err := l.FinishRecord(o, fpOf(o)); err != nil {
				t.Fatalf("finish %d: %v", o, err)
			}
		}
	}

	// 0 pinned, 1-999 finished one by one in a two-slot ring: every
	// finished entry, 1's included, is compacted away.
	l := ledger.New(2)
	_ = l.Admit(0)
	for o := int64(1); o < 1000; o++ {
		_ = l.Admit(o)
		finish(l, o)
	}
	if l.Slots() > 4 {
		t.Fatalf("%d slots for one record in flight", l.Slots())
	}
	if _, r := decode(l); r.First != 1 || r.Lead != fpOf(1) || r.Tail != fpOf(999) {
		t.Fatalf("0 pinned, 1-999 finished: first %d lead %08x tail %08x; want 1 %08x %08x", r.First, r.Lead, r.Tail, fpOf(1), fpOf(999))
	}
	// 1000 and 1002 unfinished, 1001 and 1003 finished; 0 finishes: the
	// watermark moves to 1000 and the first record skipped is 1001.
	for o := int64(1000); o < 1004; o++ {
		_ = l.Admit(o)
	}
	finish(l, 1003, 1001, 0)
	if wm, r := decode(l); wm != 1000 || r.First != 1001 || r.Lead != fpOf(1001) {
		t.Fatalf("after 0 finished: %d, first %d lead %08x; want 1000, 1001 %08x", wm, r.First, r.Lead, fpOf(1001))
	}
	// 1000 finishes: the watermark moves to 1002, and 1003 is first.
	finish(l, 1000)
	wm, r := decode(l)
	if wm != 1002 || r.First != 1003 || r.Lead != fpOf(1003) || r.End != 1004 {
		t.Fatalf("after 1000 finished: %d, first %d lead %08x end %d; want 1002, 1003 %08x, 1004", wm, r.First, r.Lead, r.End, fpOf(1003))
	}

	// A new owner of [1002, 1004) runs 1002 again; until it has been handed
	// 1003 its first is its predecessor's.
	next := ledger.New(4)
	_ = next.Restore(r)
	_ = next.Admit(1002)
	if _, r2 := decode(next); r2.First != 1003 || r2.Lead != fpOf(1003) || r2.Tail != fpOf(1003) {
		t.Fatalf("the new owner, 1002 in flight: first %d lead %08x tail %08x; want 1003 %08x %08x", r2.First, r2.Lead, r2.Tail, fpOf(1003), fpOf(1003))
	}
	// Handed 1003 (finished as the predecessor did), it knows it itself.
	_ = next.Admit(1003)
	finish(next, 1003)
	if _, r2 := decode(next); r2.First != 1003 || r2.Lead != fpOf(1003) {
		t.Fatalf("the new owner, 1003 handed over: first %d lead %08x; want 1003 %08x", r2.First, r2.Lead, fpOf(1003))
	}

	// A predecessor that finished 11-13 and 15, with 10 and 14 unfinished.
	p := ledger.New(8)
	for o := int64(10); o < 16; o++ {
		_ = p.Admit(o)
	}
	finish(p, 11, 12, 13, 15)
	_, pr := decode(p)
	// Its successor is handed 10-12, runs 10 and finishes 11 and 12 as
	// the predecessor did; 10 finishes too. Nothing is in flight, and the
	// lowest finished record above its watermark 13 is 13, which it has not
	// been handed: the lead is unknown.
	s := ledger.New(8)
	_ = s.Restore(pr)
	for o := int64(10); o < 13; o++ {
		_ = s.Admit(o)
	}
	finish(s, 11, 12, 10)
	wm, r3 := decode(s)
	if wm != 13 || r3.End != 16 || r3.Lead != 0 || r3.First != 15 || r3.Tail != fpOf(15) {
		t.Fatalf("the successor caught up to 12: %d, end %d, first %d lead %08x tail %08x; want 13, 16, an unknown lead at 15, tail %08x", wm, r3.End, r3.First, r3.Lead, r3.Tail, fpOf(15))
	}
	// Handed 13 (finished) and 14 (in flight): 13 lies below the watermark
	// 14 and nothing finished here lies above it: still unknown. 15 comes,
	// finished as the predecessor did: known again.
	_ = s.Admit(13)
	finish(s, 13)
	_ = s.Admit(14)
	if _, r3 := decode(s); r3.Lead != 0 {
		t.Fatalf("the successor with 14 in flight names the lead %08x at %d; nothing above 14 finished here", r3.Lead, r3.First)
	}
	_ = s.Admit(15)
	finish(s, 15)
	if _, r3 := decode(s); r3.First != 15 || r3.Lead != fpOf(15) {
		t.Fatalf("the successor, 15 finished: first %d lead %08x; want 15 %08x", r3.First, r3.Lead, fpOf(15))
	}
}

func TestSetReadingRefusesNonTokens(t *testing.T) {
	l := ledger.New(1)
	for _, bad := range []string{"key:rc", "Key", "key rc", strings.Repeat("a", 33)} {
		if err := l.SetReading(bad); err == nil {
			t.Fatalf("SetReading(%q) accepted it", bad)
		}
	}
	if err := l.SetReading("partition.ru"); err != nil {
		t.Fatal(err)
	}
}
