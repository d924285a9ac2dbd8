package ledger_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/ledger"
)

// A chain of owners, each restoring what the last committed (when
// its commit is decodable), crashing at random, under random size limits:
// no commit ever calls finished an offset that exists and no owner finished,
// and a fingerprint a commit names is that of the record it says: the lead
// the first record a resume would skip, the tail the record at its last
// offset.
func TestMetadataSurvivesAChainOfOwners(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		exists := map[int64]bool{}
		finished := map[int64]bool{}
		var top int64 = -1 // highest offset that exists
		base := int64(0)
		var resume *ledger.Resume
		owners := rapid.IntRange(1, 6).Draw(t, "owners")
		for k := 0; k < owners; k++ {
			l := ledger.New(rapid.IntRange(1, 4).Draw(t, "cap"))
			if resume != nil {
				if err := l.Restore(*resume); err != nil {
					t.Fatal(err)
				}
			}
			next := base
			var open []int64
			steps := rapid.IntRange(0, 80).Draw(t, "steps")
			admittedAny := false
			for s := 0; s < steps; s++ {
				if len(open) == 0 || rapid.Bool().Draw(t, "admit") {
					// redeliver what exists from base on, then new offsets with gaps
					if next <= top {
						for !exists[next] {
							next++
						}
					} else {
						next += rapid.Int64Range(0, 3).Draw(t, "gap")
						exists[next] = true
						top = next
					}
					o := next
					next++
					if err := l.Admit(o); err != nil {
						t.Fatal(err)
					}
					admittedAny = true
					if l.Restored(o) {
						if !finished[o] {
							t.Fatalf("owner %d: restored %d as finished; nobody finished it", k, o)
						}
						if _, err := l.FinishRecord(o, fpOf(o)); err != nil {
							t.Fatal(err)
						}
						continue
					}
					open = append(open, o)
					continue
				}
				i := rapid.IntRange(0, len(open)-1).Draw(t, "which")
				o := open[i]
				open = append(open[:i], open[i+1:]...)
				if _, err := l.FinishRecord(o, fpOf(o)); err != nil {
					t.Fatal(err)
				}
				finished[o] = true
			}
			if !admittedAny {
				continue // commits nothing: the last commit stands
			}
			wm, meta, _ := l.Commit(rapid.IntRange(0, 120).Draw(t, "maxBytes"))
			if wm < base {
				t.Fatalf("owner %d: committed %d below the previous commit %d", k, wm, base)
			}
			for o := base; o < wm; o++ {
				if exists[o] && !finished[o] {
					t.Fatalf("owner %d: committed %d past unfinished %d", k, wm, o)
				}
			}
			base, resume = wm, nil
			if meta == "" {
				continue
			}
			r, err := ledger.DecodeMetadata(meta)
			if err != nil {
				t.Fatalf("decode %q: %v", meta, err)
			}
			skipped := int64(-1)
			for o := r.Base; o < r.End; o++ {
				if r.Finished(o) && exists[o] && !finished[o] {
					t.Fatalf("owner %d: %q calls unfinished %d finished", k, meta, o)
				}
				if r.Finished(o) && exists[o] && skipped < 0 {
					skipped = o
				}
			}
			if r.Lead != 0 && (r.First != skipped || r.Lead != fpOf(skipped)) {
				t.Fatalf("owner %d: %q names %d with %08x as its first; the first record it skips is %d (%08x)", k, meta, r.First, r.Lead, skipped, fpOf(skipped))
			}
			if r.Tail != 0 && (!exists[r.End-1] || r.Tail != fpOf(r.End-1)) {
				t.Fatalf("owner %d: %q names %08x as the tail at %d; want %08x", k, meta, r.Tail, r.End-1, fpOf(r.End-1))
			}
			resume = &r
		}
	})
}
