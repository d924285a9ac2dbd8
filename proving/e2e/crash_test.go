package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/proving/offsets"
)

// commitOf is what a listener would commit for a partition whose records
// from..to were admitted and those in done finished.
func commitOf(t *testing.T, from, to int64, done ...int64) (int64, string) {
	t.Helper()
	l := ledger.New(16)
	for o := from; o <= to; o++ {
		if err := l.Admit(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range done {
		if _, err := l.Finish(o); err != nil {
			t.Fatal(err)
		}
	}
	wm, md, _ := l.Commit(4096)
	return wm, md
}

func statusOf(parts ...[3]int64) listenerStatus {
	var st listenerStatus
	for _, p := range parts {
		st.Partitions = append(st.Partitions, partitionStatus{Partition: int32(p[0]), Admitted: p[1], InFlight: int(p[2])})
	}
	return st
}

func TestWhatRunsAgain(t *testing.T) {
	// Partition 0: 10..19 admitted, 10 and 15 unfinished at the commit; 15
	// finished since (not committed), 18 and 19 still in flight at the kill.
	wm, md := commitOf(t, 10, 17, 11, 12, 13, 14, 16, 17)
	if wm != 10 || md == "" {
		t.Fatalf("commit %d %q", wm, md)
	}
	progress := offsets.Progress{Committed: map[int32]int64{0: wm, 1: 5, 2: 7}, Metadata: map[int32]string{0: md, 1: "", 2: md}}
	// Partition 1: no metadata (a listener before commit metadata): 5..9
	// run again, 2 of them in flight. Partition 2: metadata of another
	// offset: trusted for nothing.
	st := statusOf([3]int64{0, 19, 3}, [3]int64{1, 9, 2}, [3]int64{2, 8, 0})
	listed, rerun, finished, problems := whatRunsAgain(st, progress)
	// Partition 0: listed 11-14, 16, 17; rerun 10, 15, 18, 19 (3 in flight).
	if listed != 6 || rerun != 4+5+2 || finished != 1+3+2 {
		t.Fatalf("listed %d, rerun %d, finished run again %d", listed, rerun, finished)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "partition 2") {
		t.Fatalf("problems %q", problems)
	}
	progress.Metadata[1] = "pf3:5:3:1,2:7:00000000:00000000:key.rc:00000000"
	if _, _, _, problems := whatRunsAgain(st, progress); len(problems) != 2 || !strings.Contains(problems[0], "checksum") {
		t.Fatalf("damaged metadata: problems %q", problems)
	}
}

func TestKillJudgement(t *testing.T) {
	k := killRecord{n: 3, inFlight: 100, margin: 2, finishedWindow: 50, window: 2 * time.Second}
	if p := k.judge(102); len(p) != 0 {
		t.Fatalf("within the bounds: %q", p)
	}
	if p := k.judge(103); len(p) != 1 || !strings.Contains(p[0], "103 evaluations redone") {
		t.Fatalf("redone past in flight: %q", p)
	}
	k.rerunFinished = 51
	if p := k.judge(0); len(p) != 1 || !strings.Contains(p[0], "51 finished records run again") {
		t.Fatalf("run again past the window: %q", p)
	}
	k.rerunFinished, k.metadataProblems = 0, []string{"partition 1: bad"}
	if p := k.judge(0); len(p) != 1 || !strings.Contains(p[0], "partition 1: bad") {
		t.Fatalf("metadata problem: %q", p)
	}
}

func TestFinishedWithinAndAdmissionMargin(t *testing.T) {
	t0 := time.Now()
	at := func(s float64, finished, admitted int64) statusSample {
		var st listenerStatus
		st.Totals.Succeeded, st.Totals.Admitted = finished, admitted
		return statusSample{at: t0.Add(time.Duration(s * float64(time.Second))), st: st}
	}
	p := &listenerProc{started: t0}
	for _, s := range []statusSample{at(1, 0, 0), at(2, 100, 300), at(3, 300, 500), at(4, 600, 600)} {
		p.addSample(s)
	}
	now := at(4.5, 700, 650)
	// Within 2 s of 4.5 s: from 2.5 s, halfway between 100 and 300.
	if n, w := finishedWithin(p, now.st, now.at, 2*time.Second); n != 700-200 || w != 2*time.Second {
		t.Fatalf("finished within 2s: %d over %v", n, w)
	}
	if n, w := finishedWithin(&listenerProc{started: t0.Add(3 * time.Second)}, now.st, now.at, 2*time.Second); n != 700 || w != 1500*time.Millisecond {
		t.Fatalf("a young process: %d over %v", n, w)
	}
	if n, w := finishedWithin(&listenerProc{started: t0}, now.st, now.at, 2*time.Second); n != 700 || w != 4500*time.Millisecond {
		t.Fatalf("no samples: %d over %v", n, w)
	}
	// The peak admission rate in the last 2 s is 200/s (2 s to 3 s); 10 ms at it is 2.
	if m := admissionMargin(p, now.st, now.at, 10*time.Millisecond); m != 2+1 {
		t.Fatalf("margin %d", m)
	}
}
