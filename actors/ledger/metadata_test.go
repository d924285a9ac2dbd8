package ledger_test

import (
	"errors"
	"fmt"
	"hash/crc32"
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
		if _, err := l.Finish(o); err != nil {
			t.Fatalf("finish %d: %v", o, err)
		}
		m.finished[o] = true
	}
}

// checkSound decodes what l commits and fails when it calls finished an
// offset that was admitted and that no owner (model) finished.
func checkSound(t *rapid.T, l *ledger.Ledger, maxBytes int, ms ...*metaModel) (ledger.Resume, bool) {
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
	for o := r.Base; o < r.End; o++ {
		if !r.Finished(o) {
			continue
		}
		exists, finished := false, false
		for _, m := range ms {
			exists, finished = exists || m.exists[o], finished || m.finished[o]
		}
		if exists && !finished {
			t.Fatalf("metadata %q calls offset %d finished; it was admitted and never finished", meta, o)
		}
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
		for o := range m.finished {
			highest = max(highest, o)
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
// what the first owner finished.
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
				if _, err := second.Finish(o); err != nil {
					t.Fatal(err)
				}
				m2.finished[o] = true
			} else if rapid.Bool().Draw(t, "finish now") {
				if _, err := second.Finish(o); err != nil {
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
	})
}

// TestMetadataFormat pins the format documented in docs/architecture.md:
// committed at 1200; 1200, 1203 and 1204 unfinished; 1201, 1202 and
// 1205-1300 finished, the record at 1300 fingerprinted 0000beef, read in
// key order under read_committed.
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
	body := "pf2:1200:101:1,2,2,96:0514beef:key.rc"
	want := fmt.Sprintf("%s:%08x", body, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
	if wm != 1200 || meta != want {
		t.Fatalf("Commit = %d, %q; want 1200, %q", wm, meta, want)
	}
	if want != "pf2:1200:101:1,2,2,96:0514beef:key.rc:21b4f722" {
		t.Fatalf("the documented example's checksum changed: %s", want)
	}
	// Finishing the head moves the watermark to 1203: 1205-1300 stay finished.
	if _, err := l.Finish(1200); err != nil {
		t.Fatal(err)
	}
	if wm, meta, _ := l.Commit(4096); wm != 1203 || !strings.HasPrefix(meta, "pf2:1203:98:2,96:0514beef:key.rc:") {
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
	for _, tc := range []struct {
		name, meta string
		foreign    bool
	}{
		{"empty", "", true},
		{"another client", "consumer-7 state", true},
		{"version 1, no history to check", valid("pf1:10:5:1,4"), true},
		{"a later version", valid("pf3:10:5:1,4:0000002a:key.rc"), true},
		{"no checksum", "pf2:10:5:1,4:0000002a:key.rc", false},
		{"checksum wrong", "pf2:10:5:1,4:0000002a:key.rc:00000000", false},
		{"checksum upper case", "pf2:10:5:1,4:0000002a:key.rc:" + strings.ToUpper(valid("pf2:10:5:1,4:0000002a:key.rc")[len("pf2:10:5:1,4:0000002a:key.rc:"):]), false},
		{"checksum short", "pf2:10:5:1,4:0000002a:key.rc:abc", false},
		{"too few fields", valid("pf2:10:5:1,4:0000002a"), false},
		{"too many fields", valid("pf2:10:5:1,4:0000002a:key.rc:7"), false},
		{"tail short", valid("pf2:10:5:1,4:2a:key.rc"), false},
		{"tail upper case", valid("pf2:10:5:1,4:0000002A:key.rc"), false},
		{"reading not a token", valid("pf2:10:5:1,4:0000002a:Key rc"), false},
		{"reading too long", valid("pf2:10:5:1,4:0000002a:" + strings.Repeat("k", 33)), false},
		{"odd runs", valid("pf2:10:5:1,3,1:0000002a:key.rc"), false},
		{"runs short of the count", valid("pf2:10:6:1,4:0000002a:key.rc"), false},
		{"runs past the count", valid("pf2:10:4:1,4:0000002a:key.rc"), false},
		{"an empty run after the first", valid("pf2:10:5:1,0,0,4:0000002a:key.rc"), false},
		{"zero count", valid("pf2:10:0:0,0:0000002a:key.rc"), false},
		{"negative base", valid("pf2:-10:5:1,4:0000002a:key.rc"), false},
		{"plus sign", valid("pf2:+10:5:1,4:0000002a:key.rc"), false},
		{"leading zero", valid("pf2:010:5:1,4:0000002a:key.rc"), false},
		{"base overflow", valid("pf2:9223372036854775807:5:1,4:0000002a:key.rc"), false},
		{"base out of int64", valid("pf2:99999999999999999999:5:1,4:0000002a:key.rc"), false},
		{"not a number", valid("pf2:10:5:1,x:0000002a:key.rc"), false},
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
	r, err := ledger.DecodeMetadata(valid("pf2:10:5:0,5:0000002a:"))
	if err != nil || r.Base != 10 || r.End != 15 || !r.Finished(10) || r.Unfinished() != 0 || r.Tail != 42 || r.Reading != "" {
		t.Fatalf("a first run of 0 unfinished: %+v, %v", r, err)
	}
}

// FuzzDecodeMetadata: malformed metadata never panics, and what decodes
// never speaks of an offset outside the range it states.
func FuzzDecodeMetadata(f *testing.F) {
	for _, seed := range []string{
		"", "pf2:", "pf2:1200:101:1,2,2,96:0514beef:key.rc:21b4f722", "pf2:0:1:0,1:00000000::00000000",
		"pf2:10:5:1,4:00000000:x:ffffffff", "pf2:9223372036854775806:1:0,1:00000001:a:12345678", "pf2::::::", "pf2:1:2:3,4,5:6:7:8",
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
