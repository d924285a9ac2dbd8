package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/patchflow/patchflow/actors/ledger"
)

// completions is what one process's record log (the simulated handler's
// LISTENER_SIMULATED_RECORD_LOG: a line "partition offset" per completed
// record) says it completed: per partition, how often each offset.
type completions struct {
	counts map[int32][]uint32 // indexed by offset, up to the partition's end offset
	lines  int64
}

// parseRecordLog reads a record log of a topic whose partitions end at
// ends. A line that is not "partition offset", or names an offset outside
// the topic, is an error: the tally would be wrong.
func parseRecordLog(r io.Reader, ends map[int32]int64) (*completions, error) {
	c := &completions{counts: map[int32][]uint32{}}
	for p, end := range ends {
		c.counts[p] = make([]uint32, end)
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		ps, offs, ok := strings.Cut(sc.Text(), " ")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(offs, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("record log line %d: %q is not \"partition offset\"", n, sc.Text())
		}
		counts, known := c.counts[int32(p)]
		if !known || o < 0 || o >= int64(len(counts)) {
			return nil, fmt.Errorf("record log line %d: partition %d offset %d is not on the topic", n, p, o)
		}
		counts[o]++
		c.lines++
	}
	return c, sc.Err()
}

// readRecordLog reads the record log at path; a log never created is empty.
func readRecordLog(path string, ends map[int32]int64) (*completions, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return parseRecordLog(strings.NewReader(""), ends)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := parseRecordLog(f, ends)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// replayTally is what the record logs of the processes that consumed a
// topic say about it, taken together.
type replayTally struct {
	// HandledTwice counts records completed more than once, in one log or
	// across several.
	HandledTwice int64
	// Extra counts completions beyond one per record.
	Extra int64
	// Never counts records below the end offsets that no log names.
	Never int64
}

// tally counts over the offsets of ends.
func tally(ends map[int32]int64, logs ...*completions) replayTally {
	var t replayTally
	for p, end := range ends {
		for o := range end {
			var n uint32
			for _, l := range logs {
				n += l.counts[p][o]
			}
			switch {
			case n == 0:
				t.Never++
			case n > 1:
				t.HandledTwice++
				t.Extra += int64(n - 1)
			}
		}
	}
	return t
}

// commitCover is what a group's commit says is done: every offset below the
// committed one, and those its metadata names finished. Metadata counts
// only when it decodes and speaks of the offset it was committed with, as
// the listener itself trusts it.
type commitCover struct {
	committed map[int32]int64
	resumes   map[int32]*ledger.Resume
}

func newCommitCover(committed map[int32]int64, metadata map[int32]string) commitCover {
	c := commitCover{committed: committed, resumes: map[int32]*ledger.Resume{}}
	for p, m := range metadata {
		r, err := ledger.DecodeMetadata(m)
		if err == nil && r.Base == committed[p] {
			c.resumes[p] = &r
		}
	}
	return c
}

// below counts the records below the committed offsets.
func (c commitCover) below() int64 {
	var n int64
	for _, o := range c.committed {
		n += max(o, 0)
	}
	return n
}

// named counts the offsets the metadata names finished above the committed ones.
func (c commitCover) named() int64 {
	var n int64
	for _, r := range c.resumes {
		n += r.FinishedCount()
	}
	return n
}

// split counts the records l completed that the commit covers, and those it
// does not (which the next owner runs again).
func (c commitCover) split(ends map[int32]int64, l *completions) (covered, uncovered int64) {
	for p, end := range ends {
		r := c.resumes[p]
		for o := range end { // ascending, as Resume.Finished prefers
			if l.counts[p][o] == 0 {
				continue
			}
			if o < c.committed[p] || (r != nil && r.Finished(o)) {
				covered++
			} else {
				uncovered++
			}
		}
	}
	return covered, uncovered
}

// lineCounter follows a growing record log: it counts the lines appended
// since it last looked, and remembers when each count was reached.
type lineCounter struct {
	path    string
	f       *os.File
	lines   int64
	samples []lineSample
}

type lineSample struct {
	at    time.Time
	lines int64
}

// count reads what was appended and returns the lines so far.
func (c *lineCounter) count() (int64, error) {
	if c.f == nil {
		f, err := os.Open(c.path)
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		c.f = f
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := c.f.Read(buf)
		c.lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			return c.lines, err
		}
	}
	c.samples = append(c.samples, lineSample{time.Now(), c.lines})
	return c.lines, nil
}

// since returns how many lines were appended after the moment at, as far as
// the samples tell (the count at the last sample before at).
func (c *lineCounter) since(at time.Time) int64 {
	i := sort.Search(len(c.samples), func(i int) bool { return !c.samples[i].at.Before(at) })
	if i == 0 {
		return c.lines
	}
	return c.lines - c.samples[i-1].lines
}

func (c *lineCounter) close() {
	if c.f != nil {
		c.f.Close()
	}
}
