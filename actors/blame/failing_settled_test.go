package blame_test

import (
	"testing"

	"github.com/patchflow/patchflow/actors/blame"
)

// A record that got past a dependency is no longer failing there, whether
// a case heard it or not. Two records caught by a short VMaaS outage,
// retried past VMaaS and now waiting out a database outage, must not count
// as failing at VMaaS in later VMaaS cases: a record bad at VMaaS alone,
// beside a steadily passing check, is its own. Kept as failing there until
// they ended (removed only through a case that heard them), they had it
// held for as long as they lived.
func TestRecordsPastTheDependencyAreNotFailingThere(t *testing.T) {
	b := newBook() // window 1 s
	nop := func() {}
	b.Call("database", rec(9), at(0), at(1), true) // known
	b.Check("vmaas", at(0), at(1), false)          // a short VMaaS outage
	var r1, r2, bad blame.Record
	r1.Self, r2.Self, bad.Self = rec(11), rec(12), rec(20)
	r1.Fail(b, 1, "vmaas", at(100), at(110), blame.CauseAny, nop) // shared at once, waiting
	r2.Fail(b, 1, "vmaas", at(100), at(120), blame.CauseAny, nop)
	b.Check("vmaas", at(600), at(601), true) // VMaaS serves again
	// Their retries get past VMaaS and fail at the database, in an outage now.
	b.Check("database", at(650), at(651), false)
	b.Call("vmaas", rec(11), at(700), at(710), true)
	b.Call("vmaas", rec(12), at(700), at(710), true)
	r1.Fail(b, 2, "database", at(700), at(730), blame.CauseAny, nop)
	r2.Fail(b, 2, "database", at(700), at(730), blame.CauseAny, nop)

	// A record bad at VMaaS alone; VMaaS's check passes steadily.
	for i, ms := range []int{3000, 5000, 7000} {
		for c := ms - 1900; c < ms; c += 300 {
			b.Check("vmaas", at(c), at(c+1), true)
		}
		bad.Fail(b, int32(i+1), "vmaas", at(ms), at(ms+10), blame.CauseAny, nop)
		for c := ms + 100; c <= ms+900; c += 300 {
			b.Check("vmaas", at(c), at(c+1), true)
		}
		j := bad.Judge(at(ms + 1100))
		if len(j) != 1 {
			t.Fatalf("attempt %d: verdicts %v, want one", i+1, j)
		}
		if j[0].Verdict != blame.Own {
			t.Errorf("attempt %d: verdict %v beside a passing check, with the only other records gone past VMaaS %.1f s ago (want own)", i+1, j[0].Verdict, float64(ms-710)/1000)
		}
	}
	r1.Close()
	r2.Close()
	bad.Close()
}
