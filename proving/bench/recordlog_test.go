package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ledger"
)

func mustParse(t *testing.T, log string, ends map[int32]int64) *completions {
	t.Helper()
	c, err := parseRecordLog(strings.NewReader(log), ends)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A record in both logs, or twice in one, is handled twice; one in neither
// is never handled; extra completions are counted one by one.
func TestTallyCountsRecordsHandledTwiceAndNever(t *testing.T) {
	ends := map[int32]int64{0: 5, 1: 3}
	first := mustParse(t, "0 0\n0 1\n1 0\n0 2\n1 1\n", ends)
	second := mustParse(t, "0 2\n0 3\n1 1\n1 2\n0 3\n0 3\n", ends)
	got := tally(ends, first, second)
	// Offsets 0/2 and 1/1 are in both logs; 0/3 three times in the second;
	// 0/4 in neither.
	want := replayTally{HandledTwice: 3, Extra: 4, Never: 1}
	if got != want {
		t.Fatalf("tally %+v, want %+v", got, want)
	}
	if first.lines != 5 || second.lines != 6 {
		t.Fatalf("lines %d and %d", first.lines, second.lines)
	}
	if got := tally(ends, mustParse(t, "0 0\n0 1\n0 2\n0 3\n0 4\n1 0\n1 1\n1 2\n", ends)); got != (replayTally{}) {
		t.Fatalf("every record once: %+v", got)
	}
}

// A log the tally cannot trust is an error, not a silently wrong count.
func TestParseRecordLogRefusesWhatIsNotOnTheTopic(t *testing.T) {
	ends := map[int32]int64{0: 5}
	for _, bad := range []string{"0 5\n", "1 0\n", "0 -1\n", "0\n", "0 1 2\n", "x 1\n", "0 1\n0 2"} {
		if bad == "0 1\n0 2" {
			if _, err := parseRecordLog(strings.NewReader(bad), ends); err != nil {
				t.Errorf("a last line without its newline is still a line: %v", err)
			}
			continue
		}
		if _, err := parseRecordLog(strings.NewReader(bad), ends); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
	c, err := readRecordLog(filepath.Join(t.TempDir(), "never-written"), ends)
	if err != nil || c.lines != 0 {
		t.Fatalf("a log never created: %v, %d lines", err, c.lines)
	}
}

// The commit covers what is below the committed offset and what its
// metadata names finished, and only metadata that speaks of that commit.
func TestCommitCoverFollowsTheMetadata(t *testing.T) {
	l := ledger.New(0)
	for o := range int64(10) {
		if err := l.Admit(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []int64{0, 1, 3, 4, 7} {
		if _, err := l.Finish(o); err != nil {
			t.Fatal(err)
		}
	}
	wm, md, ok := l.Commit(4096)
	if !ok || wm != 2 {
		t.Fatalf("commit %d %q %v", wm, md, ok)
	}
	ends := map[int32]int64{0: 10, 1: 10}
	cover := newCommitCover(map[int32]int64{0: wm, 1: 2}, map[int32]string{0: md, 1: md + "x"})
	if cover.below() != 4 || cover.named() != 3 {
		t.Fatalf("below %d, named %d; want 4 and 3 (offsets 3, 4 and 7 of partition 0)", cover.below(), cover.named())
	}
	// Completed by the first process: 0-7 of partition 0, 0-4 of partition 1.
	done := mustParse(t, "0 0\n0 1\n0 2\n0 3\n0 4\n0 5\n0 6\n0 7\n1 0\n1 1\n1 2\n1 3\n1 4\n", ends)
	covered, uncovered := cover.split(ends, done)
	// Partition 0: 0, 1 below, 3, 4, 7 named: 5 covered, 2, 5, 6 not.
	// Partition 1: its metadata is damaged, so only 0 and 1 are covered.
	if covered != 7 || uncovered != 6 {
		t.Fatalf("covered %d, uncovered %d; want 7 and 6", covered, uncovered)
	}
	stale := newCommitCover(map[int32]int64{0: 1}, map[int32]string{0: md})
	if stale.named() != 0 {
		t.Fatalf("metadata of another commit counted: %d named", stale.named())
	}
	if none := newCommitCover(map[int32]int64{0: -1}, map[int32]string{0: ""}); none.below() != 0 || none.named() != 0 {
		t.Fatalf("no commit: below %d, named %d", none.below(), none.named())
	}
}

// The counter follows a file as it grows and tells what came after a moment.
func TestLineCounterFollowsAGrowingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.log")
	c := &lineCounter{path: path}
	defer c.close()
	if n, err := c.count(); n != 0 || err != nil {
		t.Fatalf("before the file exists: %d, %v", n, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write("0 0\n0 1\n")
	if n, _ := c.count(); n != 2 {
		t.Fatalf("%d lines, want 2", n)
	}
	mark := time.Now()
	write("0 2\n1 0\n1 1\n")
	if n, _ := c.count(); n != 5 {
		t.Fatalf("%d lines, want 5", n)
	}
	if n := c.since(mark); n != 3 {
		t.Fatalf("%d lines since the mark, want 3", n)
	}
	if n := c.since(time.Now().Add(-time.Hour)); n != 5 {
		t.Fatalf("%d lines in the last hour, want 5", n)
	}
}
