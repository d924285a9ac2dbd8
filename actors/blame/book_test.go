package blame_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/blame"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func rec(offset int64) blame.Source {
	return blame.Source{Topic: "events", Partition: 0, Offset: offset}
}

func newBook() *blame.Book { return blame.NewBook(blame.Config{Window: time.Second, Enough: 8}) }

func TestJudgeTable(t *testing.T) {
	type E = blame.Evidence
	cases := []struct {
		e    E
		want blame.Verdict
	}{
		{E{}, blame.NoEvidence},
		{E{Served: 2}, blame.NoEvidence}, // too few to say
		{E{Served: 3}, blame.Own},
		{E{Served: 4, Failed: 1}, blame.Own},
		{E{Served: 3, Failed: 1}, blame.NoEvidence},                 // one failing other, too few served
		{E{Failed: 1}, blame.NoEvidence},                            // another record failing: maybe bad too
		{E{Failed: 1, CheckPassed: true}, blame.Own},                // the check says the path serves
		{E{SuspectsFailed: 1, CheckPassed: true}, blame.Own},        // two bad records, one partition each, a check
		{E{Failed: 2, CheckPassed: true}, blame.NoEvidence},         // two others failing beside a passing check: bad ones, or an outage it misses
		{E{SuspectsFailed: 5, CheckPassed: true}, blame.NoEvidence}, // everybody failing for a while, a check that misses it
		{E{Failed: 2}, blame.Shared},                                // two others failing: not its alone
		{E{SuspectsFailed: 5}, blame.Shared},                        // the records in flight failing on and on: an outage
		{E{Served: 7, Failed: 2}, blame.Shared},
		{E{Served: 8, Failed: 2}, blame.Own},
		{E{Served: 5, SuspectsFailed: 3}, blame.Own},     // fresh records served: the failing suspects are bad ones
		{E{Served: 50, CheckFailed: true}, blame.Shared}, // a failed check wins
		{E{CheckPassed: true}, blame.Own},
		{E{Served: 7, Recovered: 1}, blame.Shared}, // a record failing with it was served after: it passed
		{E{Recovered: 1, CheckPassed: true}, blame.Shared},
		{E{Served: 8, NamedFailed: 2}, blame.NoEvidence}, // others failing at the unreported dependency it names: held
		{E{Served: 8, NamedFailed: 1}, blame.NoEvidence}, // one other: a bad one too, or an outage starting
		{E{Served: 8}, blame.Own},
		{E{Failed: 2, NamedFailed: 2}, blame.Shared},             // everything failing: shared, named or not
		{E{CheckPassed: true, Failing: 1}, blame.Own},            // one other failing there still, unheard
		{E{CheckPassed: true, Failing: 2}, blame.NoEvidence},     // two: several bad records, or an outage the check misses
		{E{Served: 3, CheckPassed: true, Failing: 5}, blame.Own}, // fresh records served speak first
		{E{Served: 8, Unreachable: true}, blame.NoEvidence},      // could not connect while others were served: held
		{E{CheckPassed: true, Unreachable: true}, blame.NoEvidence},
		{E{Failed: 2, Unreachable: true}, blame.Shared}, // others failing too: shared, as any failure
		{E{Served: 8, CheckFailed: true, Unreachable: true}, blame.Shared},
	}
	for _, c := range cases {
		if got := blame.Judge(c.e); got != c.want {
			t.Errorf("Judge(%+v) = %v, want %v", c.e, got, c.want)
		}
	}
}

// A record failing when this one failed is a suspect: its failures are not
// counted, its being served after makes the failure shared.
func TestSuspectsFailuresDoNotCountTheirRecoveryDoes(t *testing.T) {
	b := newBook()
	b.Call("vmaas", rec(9), at(0), at(1), true)
	var other, self blame.Record
	other.Self, self.Self = rec(2), rec(1)
	other.Fail(b, 1, "vmaas", at(4), at(5), blame.CauseAny, func() {}) // failing before
	self.Fail(b, 1, "vmaas", at(9), at(10), blame.CauseAny, func() {})
	b.Call("vmaas", rec(2), at(20), at(21), false) // the suspect failing again: nothing
	for i := range 3 {
		b.Call("vmaas", rec(int64(30+i)), at(30), at(31), true)
	}
	if j := self.Judge(at(2000)); len(j) != 1 || j[0].Verdict != blame.Own {
		t.Fatalf("verdicts %v, want own: a suspect's failure must not blind it", j)
	}
	self.Fail(b, 2, "vmaas", at(2099), at(2100), blame.CauseAny, func() {})
	b.Call("vmaas", rec(2), at(2200), at(2201), true) // the suspect served: it was shared
	for i := range 3 {
		b.Call("vmaas", rec(int64(40+i)), at(2300), at(2301), true)
	}
	other.Done(b, at(2199)) // and handled
	if j := self.Judge(at(4000)); len(j) != 1 || j[0].Verdict != blame.Shared {
		t.Fatalf("verdicts %v, want shared: a record failing with it got through", j)
	}
	self.Close()
}

// Only calls by other records that start within the first third of the
// window count, each record by its first call there.
func TestCaseHearsOthersInItsWindowOnly(t *testing.T) {
	b := newBook()
	b.Call("vmaas", rec(9), at(0), at(1), true) // known
	c := b.Open("vmaas", rec(1), at(100))
	b.Call("vmaas", rec(1), at(150), at(160), true)         // itself
	b.Call("vmaas", rec(2), at(50), at(200), true)          // began before the failure
	b.Call("vmaas", blame.Source{}, at(200), at(210), true) // nobody known
	b.Call("vmaas", rec(3), at(500), at(510), true)         // after the window's first third
	b.Call("database", rec(4), at(200), at(210), true)      // another dependency
	if e := c.Evidence(); e.Served != 0 || e.Failed != 0 {
		t.Fatalf("heard %+v, want none", e)
	}
	b.Call("vmaas", rec(5), at(200), at(210), false)
	b.Call("vmaas", rec(5), at(300), at(310), true) // its first call speaks for it
	b.Call("vmaas", rec(6), at(400), at(410), true)
	if e := c.Evidence(); e.Served != 1 || e.Failed != 1 {
		t.Fatalf("heard %d served and %d failed, want 1 and 1", e.Served, e.Failed)
	}
	if v := c.Verdict(at(500)); v != blame.Pending {
		t.Fatalf("verdict before the window closed with 2 heard: %v", v)
	}
	if v := c.Verdict(at(1100)); v != blame.NoEvidence {
		t.Fatalf("verdict %v, want no evidence (1 served, 1 failed)", v)
	}
	c.Close()
}

func TestCaseIsRipeWithEnoughRecords(t *testing.T) {
	b := newBook()
	c := b.Open("vmaas", rec(1), at(0))
	for i := range 8 {
		b.Call("vmaas", rec(int64(10+i)), at(10+i), at(20+i), true)
	}
	if v := c.Verdict(at(50)); v != blame.Own {
		t.Fatalf("verdict with 8 served: %v, want own at once", v)
	}
	c.Close()
}

// A dependency whose calls take longer than the window gets a window of
// twice its mean call: the calls that start within it end after it.
func TestSlowDependencyWidensTheWindow(t *testing.T) {
	b := newBook()
	for i := range 20 {
		b.Call("vmaas", rec(int64(100+i)), at(0), at(3000), true)
	}
	c := b.Open("vmaas", rec(1), at(10_000))
	if got := c.Until().Sub(at(10_000)); got < 5*time.Second {
		t.Fatalf("window %v for 3 s calls, want at least 6 s", got)
	}
	c.Close()
}

func TestResolve(t *testing.T) {
	b := newBook()
	if got := b.Resolve("inventory"); got != "inventory" {
		t.Fatalf("a named dependency resolves to %q", got)
	}
	if got := b.Resolve(""); got != blame.Handler {
		t.Fatalf("no dependency resolves to %q", got)
	}
}

// A dependency nobody reports is judged by the handler's outcomes and the
// other failures naming it: one record failing there while others are
// handled is its own; others failing there too make it held (two bad
// records, or an outage of a service only some records need), however many
// are handled.
func TestAnUnreportedDependencyIsJudgedByItsFailuresToo(t *testing.T) {
	b := newBook()
	handled := func(from, n, ms int) {
		for i := range n {
			b.Call(blame.Handler, rec(int64(from+i)), at(ms), at(ms+1), true)
		}
	}
	var self, other, third blame.Record
	self.Self, other.Self, third.Self = rec(1), rec(2), rec(3)
	self.Fail(b, 1, "inventory", at(0), at(10), blame.CauseAny, func() {})
	handled(100, 20, 20)
	if j := self.Judge(at(30)); len(j) != 0 {
		t.Fatalf("judged %v before the first third of the window: failures naming it are heard until then", j)
	}
	if j := self.Judge(at(2000)); len(j) != 1 || j[0].Verdict != blame.Own {
		t.Fatalf("a lone failure at an unreported dependency among records handled: verdicts %v, want own", j)
	}
	self.Fail(b, 2, "inventory", at(2000), at(2010), blame.CauseAny, func() {})
	handled(200, 20, 2020)
	other.Fail(b, 1, "inventory", at(2000), at(2100), blame.CauseAny, func() {})
	third.Fail(b, 1, "inventory", at(2000), at(2200), blame.CauseAny, func() {})
	if j := self.Judge(at(4000)); len(j) != 1 || j[0].Verdict != blame.NoEvidence {
		t.Fatalf("failing with two others at an unreported dependency while others are handled: verdicts %v, want no evidence (held)", j)
	}
	self.Close()
	other.Close()
	third.Close()
}

// A failure that could not connect is never the record's own: alone at a
// dependency only some records need, among records handled (a plain error,
// judged by the handler's outcomes), or at a reported one that serves the
// others (a replica refusing connections), it is held, however many
// attempts fail so.
func TestAFailureThatCouldNotConnectIsNeverOwn(t *testing.T) {
	for _, dependency := range []string{"network", "inventory", "vmaas"} {
		b := newBook()
		var self blame.Record
		self.Self = rec(1)
		for attempt := range int32(5) {
			ms := int(attempt) * 3000
			self.Fail(b, attempt+1, dependency, at(ms), at(ms+10), blame.CauseUnreachable, func() {})
			for i := range 20 {
				b.Call(blame.Handler, rec(int64(100+i)), at(ms+20), at(ms+21), true)
				b.Call("vmaas", rec(int64(100+i)), at(ms+20), at(ms+21), true)
			}
			for _, j := range self.Judge(at(ms + 2500)) {
				if j.Verdict != blame.NoEvidence {
					t.Errorf("%s: attempt %d that could not connect, others served: %v, want no evidence (held)", dependency, j.Attempt, j.Verdict)
				}
			}
		}
		if self.Own != 0 || self.Decide(1) {
			t.Errorf("%s: %d failures that could not connect counted as the record's own", dependency, self.Own)
		}
		self.Close()
	}
}

// A record's owner waits for the verdicts pending when they could take it to
// MaxAttempts; those of failures that could not connect never can, so a
// record failing only so retries at its backoff.
func TestOnlyVerdictsThatCanBeOwnAreWaitedFor(t *testing.T) {
	b := newBook() // window 1 s
	var held, bad blame.Record
	held.Self, bad.Self = rec(1), rec(2)
	for attempt := range int32(3) {
		ms := int(attempt) * 20
		held.Fail(b, attempt+1, "vmaas", at(ms), at(ms+10), blame.CauseUnreachable, func() {})
		bad.Fail(b, attempt+1, "vmaas", at(ms), at(ms+10), blame.CauseAny, func() {})
	}
	if reach, _ := held.MayReach(3); reach {
		t.Error("three pending failures that could not connect could reach MaxAttempts 3: the record waits for verdicts that cannot dead-letter it")
	}
	reach, by := bad.MayReach(3)
	if !reach || !by.Equal(at(50).Add(time.Second)) {
		t.Errorf("three pending failures: reach %v by %v, want true by the last window's end %v", reach, by, at(50).Add(time.Second))
	}
	if reach, _ := bad.MayReach(4); reach {
		t.Error("three pending failures reach MaxAttempts 4")
	}
	held.Close()
	bad.Close()
}

// Whatever else was heard, a failure that could not connect is judged as
// any other, except that an own verdict is no evidence.
func TestJudgeUnreachableIsJudgeWithoutOwn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := blame.Evidence{
			Served: rapid.IntRange(0, 12).Draw(t, "served"), Failed: rapid.IntRange(0, 6).Draw(t, "failed"),
			Recovered: rapid.IntRange(0, 2).Draw(t, "recovered"), SuspectsFailed: rapid.IntRange(0, 4).Draw(t, "suspectsFailed"),
			CheckPassed: rapid.Bool().Draw(t, "checkPassed"), CheckFailed: rapid.Bool().Draw(t, "checkFailed"),
			NamedFailed: rapid.IntRange(0, 3).Draw(t, "namedFailed"), Failing: rapid.IntRange(0, 4).Draw(t, "failing"),
		}
		want := blame.Judge(e)
		if want == blame.Own {
			want = blame.NoEvidence
		}
		e.Unreachable = true
		if got := blame.Judge(e); got != want {
			t.Fatalf("Judge(%+v) = %v, want %v", e, got, want)
		}
	})
}

// A failed check puts the dependency in outage until a check passes;
// waiters are released four per served call that began after the latest
// failure, in their order, until none is left.
func TestRecoveryReleasesWaitersAtThePaceTheyAreServed(t *testing.T) {
	b := newBook() // window 1 s
	b.Check("vmaas", at(0), at(10), false)
	if !b.Outage("vmaas", at(5000)) {
		t.Fatal("the outage a failed check began ended before a check passed")
	}
	var woken []int
	for i := range 7 {
		if _, ok := b.Await("vmaas", at(5), func() { woken = append(woken, i) }); !ok {
			t.Fatal("await refused during an outage")
		}
	}
	b.Call("vmaas", rec(1), at(-5), at(20), true) // began before the failures: nothing
	if len(woken) != 0 {
		t.Fatalf("woken %v by a call that began before the outage's failure", woken)
	}
	b.Call("vmaas", rec(2), at(12), at(13), false) // failing still: the latest failure
	b.Call("vmaas", rec(1), at(11), at(30), true)  // began before it
	if len(woken) != 0 {
		t.Fatalf("woken %v by a call that began before the latest failure", woken)
	}
	b.Call("vmaas", rec(1), at(20), at(30), true)
	if len(woken) != 4 {
		t.Fatalf("woken %v after a served call; want 4", woken)
	}
	b.Call("vmaas", rec(3), at(40), at(50), false)
	b.Call("vmaas", rec(3), at(60), at(70), true)
	b.Check("vmaas", at(71), at(72), true)
	if b.Outage("vmaas", at(1011)) {
		t.Fatal("still in outage a window past a passing check")
	}
	b.Call("vmaas", rec(4), at(80), at(90), true)
	if want := []int{0, 1, 2, 3, 4, 5, 6}; len(woken) != len(want) {
		t.Fatalf("woken %v, want %v", woken, want)
	}
	for i, w := range woken {
		if w != i {
			t.Fatalf("woken in order %v", woken)
		}
	}
}

func TestAwaitOutsideAnOutageRegistersNothing(t *testing.T) {
	b := newBook()
	if _, ok := b.Await("vmaas", at(0), func() { t.Fatal("woken") }); ok {
		t.Fatal("await accepted with no outage")
	}
}

func TestCancelledWaitersAreNotWoken(t *testing.T) {
	b := newBook()
	b.Check("vmaas", at(0), at(1), false)
	cancel, _ := b.Await("vmaas", at(1), func() { t.Fatal("a cancelled waiter was woken") })
	woke := false
	b.Await("vmaas", at(1), func() { woke = true })
	cancel()
	cancel() // harmless twice
	b.Call("vmaas", rec(1), at(10), at(11), true)
	if !woke {
		t.Fatal("the live waiter was not woken")
	}
	if n, released := b.Waiting("vmaas"); n != 0 || released != 1 {
		t.Fatalf("waiting %d, released %d; want 0 and 1", n, released)
	}
}

// A Shared verdict puts the dependency in outage for a window past it, or
// past its window's end when it is judged later: the outage is anchored to
// what was heard, not to when the record's retry came to look.
func TestSharedVerdictStartsAnOutage(t *testing.T) {
	for _, c := range []struct {
		judged    int
		in, after int // ms: in the outage, past it
	}{{1000, 1900, 2100}, {5000, 1900, 2100}, {500, -1, -1}} {
		b := newBook() // window 1 s
		k := b.Open("vmaas", rec(1), at(0))
		b.Call("vmaas", rec(2), at(10), at(20), false)
		b.Call("vmaas", rec(3), at(10), at(20), false)
		v := k.Verdict(at(c.judged))
		k.Close()
		if c.in < 0 {
			if v != blame.Pending {
				t.Fatalf("judged at %d ms: %v, want pending (2 heard, window open)", c.judged, v)
			}
			continue
		}
		if v != blame.Shared {
			t.Fatalf("judged at %d ms: %v, want shared", c.judged, v)
		}
		if !b.Outage("vmaas", at(c.in)) || b.Outage("vmaas", at(c.after)) {
			t.Fatalf("judged at %d ms: outage at %d ms %v (want true), at %d ms %v (want false)",
				c.judged, c.in, b.Outage("vmaas", at(c.in)), c.after, b.Outage("vmaas", at(c.after)))
		}
	}
}

// Property: whatever is heard, a case never counts the record's own calls,
// calls before its failure or after the first third of its window (checks:
// the whole window), a record twice, or more than the first Enough records;
// and its verdict is Judge of what it counted.
func TestCaseCountsOnlyItsEvidence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := newBook()
		self := rec(0)
		fail := rapid.IntRange(0, 500).Draw(t, "failure")
		c := b.Open("d", self, at(fail))
		type first struct{ served bool }
		want := map[int64]first{}
		passed, failedCheck, failedBefore := false, false, false
		n := rapid.IntRange(0, 60).Draw(t, "calls")
		for i := range n {
			start := rapid.IntRange(0, 2000).Draw(t, "start")
			served := rapid.Bool().Draw(t, "served")
			if rapid.IntRange(0, 9).Draw(t, "kind") == 0 {
				b.Check("d", at(start), at(start+5), served)
				if !served && start < fail && start >= fail-2000 {
					failedBefore = true
				}
				if start >= fail && start <= fail+1000 {
					if served {
						passed = true
					} else {
						failedCheck = true
					}
				}
				continue
			}
			who := rapid.Int64Range(0, 12).Draw(t, "who")
			b.Call("d", rec(who), at(start), at(start+5), served)
			if who == 0 || start < fail || start > fail+1000/3 { // records: the first third of the window
				continue
			}
			if _, seen := want[who]; !seen && len(want) < 8 { // the first Enough heard speak
				want[who] = first{served}
			}
			_ = i
		}
		ws, wf := 0, 0
		for _, f := range want {
			if f.served {
				ws++
			} else {
				wf++
			}
		}
		e := c.Evidence()
		if e.Served != ws || e.Failed != wf || e.CheckPassed != passed || e.CheckFailed != failedCheck {
			t.Fatalf("counted %+v, want %d served, %d failed, check passed %v failed %v", e, ws, wf, passed, failedCheck)
		}
		// The check speaks only when none failed in the two windows before.
		verdict := blame.Judge(blame.Evidence{Served: ws, Failed: wf, CheckPassed: passed && !failedBefore, CheckFailed: failedCheck})
		if v := c.Verdict(at(fail + 1001)); v != verdict {
			t.Fatalf("verdict %v, want %v", v, verdict)
		}
		c.Close()
	})
}

// A suspect's served call speaks for a recovery only once its attempt got
// past the dependency: served by a read and failing at its write, it did
// not get through, and two such bad records must not blind each other.
func TestASuspectServedCountsOnceItsAttemptGotThrough(t *testing.T) {
	for _, c := range []struct {
		name   string
		settle func(b *blame.Book, other *blame.Record)
		want   blame.Verdict
	}{
		// The check passes and one other record fails: Own.
		{"failed at its write", func(b *blame.Book, other *blame.Record) {
			b.Call("vmaas", rec(2), at(1210), at(1220), false)
			other.Fail(b, 2, "vmaas", at(1200), at(1220), blame.CauseAny, func() {})
		}, blame.Own},
		// Its attempt still running when the case is judged: nothing heard
		// from it, and the check alone says the path serves.
		{"still running", func(*blame.Book, *blame.Record) {}, blame.Own},
		{"handled", func(b *blame.Book, other *blame.Record) { other.Done(b, at(1200)) }, blame.Shared},
		{"failed elsewhere", func(b *blame.Book, other *blame.Record) {
			other.Fail(b, 2, "database", at(1200), at(1230), blame.CauseAny, func() {})
		}, blame.Shared},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBook()
			b.Check("vmaas", at(0), at(1), true)
			b.Call("database", rec(9), at(0), at(1), true) // known
			var other, self blame.Record
			other.Self, self.Self = rec(2), rec(1)
			other.Fail(b, 1, "vmaas", at(0), at(1000), blame.CauseAny, func() {}) // failing before
			self.Fail(b, 1, "vmaas", at(1000), at(1100), blame.CauseAny, func() {})
			b.Call("vmaas", rec(2), at(1200), at(1210), true) // its read, served
			c.settle(b, &other)
			b.Check("vmaas", at(1300), at(1301), true)
			if j := self.Judge(at(3000)); len(j) != 1 || j[0].Verdict != c.want {
				t.Fatalf("verdicts %v, want %v", j, c.want)
			}
			other.Close()
			self.Close()
		})
	}
}

// A fresh record served by a read and failing at its write failed: it is
// not evidence that the dependency serves.
func TestAFreshRecordFailingAfterARead(t *testing.T) {
	b := newBook()
	b.Call("database", rec(9), at(0), at(1), true) // known
	var self blame.Record
	self.Self = rec(1)
	self.Fail(b, 1, "database", at(0), at(100), blame.CauseAny, func() {})
	for i := range 4 {
		var fresh blame.Record
		fresh.Self = rec(int64(10 + i))
		b.Call("database", fresh.Self, at(110), at(111), true)  // read
		b.Call("database", fresh.Self, at(112), at(113), false) // write
		fresh.Fail(b, 1, "database", at(110), at(113), blame.CauseAny, func() {})
		defer fresh.Close()
	}
	if e := self.Judge(at(3000)); len(e) != 1 || e[0].Verdict != blame.Shared {
		t.Fatalf("verdicts %v, want shared: four records failing at their writes with it", e)
	}
	self.Close()
}

// Failed calls do not widen the window: a record whose calls hang until
// its attempt's deadline must not stretch its own cases' windows.
func TestFailedCallsDoNotWidenTheWindow(t *testing.T) {
	b := newBook()
	for i := range 20 {
		b.Call("vmaas", rec(1), at(i*3000), at(i*3000+3000), false)
	}
	c := b.Open("vmaas", rec(1), at(100_000))
	if got := c.Until().Sub(at(100_000)); got != time.Second {
		t.Fatalf("window %v after 3 s failed calls, want the configured 1 s", got)
	}
	c.Close()
}

// A record whose retry starts by its backoff waits for no recovery any
// more: the next served call wakes the record still waiting.
func TestARetryWithdrawsTheWait(t *testing.T) {
	b := newBook()
	b.Check("vmaas", at(0), at(1), false) // outage
	woken := map[int64]int{}
	records := make([]*blame.Record, 5)
	for i := range records {
		off := int64(i + 1)
		records[i] = &blame.Record{Self: rec(off)}
		records[i].Fail(b, 1, "vmaas", at(10), at(20), blame.CauseAny, func() { woken[off]++ })
	}
	for _, r := range records[:4] {
		r.Retry() // their backoffs ran out
	}
	b.Call("vmaas", rec(99), at(100), at(101), true)
	if woken[5] != 1 || len(woken) != 1 {
		t.Fatalf("woken %v, want the one still waiting (5) once", woken)
	}
	for _, r := range records {
		r.Close()
	}
}

// A record whose attempt got past the dependency ends its run of failures
// there: it is no suspect in later cases, so its being served there again
// is a fresh record's, not a recovery for ever.
func TestASuspectThatGotPastIsFreshAgain(t *testing.T) {
	b := newBook()
	b.Call("database", rec(9), at(0), at(1), true) // known
	b.Call("vmaas", rec(9), at(0), at(1), true)
	var self, other blame.Record
	self.Self, other.Self = rec(1), rec(2)
	other.Fail(b, 1, "vmaas", at(0), at(5), blame.CauseAny, func() {}) // a blip at VMaaS
	self.Fail(b, 1, "vmaas", at(900), at(1000), blame.CauseAny, func() {})
	b.Call("vmaas", rec(2), at(1200), at(1210), true)                           // got past VMaaS...
	other.Fail(b, 2, "database", at(1200), at(1230), blame.CauseAny, func() {}) // ...failing elsewhere
	if j := self.Judge(at(2100)); len(j) != 1 || j[0].Verdict != blame.Shared {
		t.Fatalf("first verdicts %v, want shared: a record failing with it got past", j)
	}
	self.Fail(b, 2, "vmaas", at(2900), at(3000), blame.CauseAny, func() {})
	for i := range 3 {
		b.Call("vmaas", rec(int64(2+i*10)), at(3100), at(3110), true) // rec(2) among them, fresh now
	}
	other.Fail(b, 3, "database", at(3100), at(3130), blame.CauseAny, func() {})
	if j := self.Judge(at(4100)); len(j) != 1 || j[0].Verdict != blame.Own {
		t.Fatalf("second verdicts %v, want own: the one-time suspect is fresh again", j)
	}
	self.Close()
	other.Close()
}
