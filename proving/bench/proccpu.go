package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// procTimes is what /proc/<pid>/stat says of a process's CPU.
type procTimes struct {
	ppid int
	// self is its own user and system time (every thread of it);
	// reaped its children's that it has waited for (cutime + cstime),
	// grandchildren included as far as each child waited for its own.
	self, reaped time.Duration
}

// readProcTimes reads /proc/<pid>/stat.
func readProcTimes(pid int) (procTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procTimes{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses a /proc/<pid>/stat line: the command (field 2) is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseProcStat(b []byte) (procTimes, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procTimes{}, fmt.Errorf("no command in %q", b)
	}
	f := bytes.Fields(b[end+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procTimes{}, fmt.Errorf("short stat line %q", b)
	}
	num := func(field int) int64 { // field as numbered in proc(5)
		n, _ := strconv.ParseInt(string(f[field-3]), 10, 64)
		return n
	}
	return procTimes{
		ppid:   int(num(4)),
		self:   time.Duration(num(14)+num(15)) * clockTick, // utime + stime
		reaped: time.Duration(num(16)+num(17)) * clockTick, // cutime + cstime
	}, nil
}

// processCPU is the CPU time one process has used (all its threads).
func processCPU(pid int) (time.Duration, error) {
	t, err := readProcTimes(pid)
	return t.self, err
}

// treeCPU is the CPU time a process and its descendants have used: its
// own, what its reaped children used (cutime + cstime), and the same again
// for each child alive now. The difference of two readings is what the
// tree used in between, whichever children came and went: a child alive at
// both counts its own difference; one that ended in between counts in the
// parent's reaped time at the second reading, less its own time at the
// first; one born in between counts whole. A child that exits between the
// listing of /proc and the reading of its own stat is missed by that one
// reading (a few ticks of a process that was ending); PostgreSQL's backends
// live as long as the pooled connection that started them, so in a
// benchmark window that is rare.
func treeCPU(root int) (time.Duration, error) {
	children, err := childrenOf()
	if err != nil {
		return 0, err
	}
	var sum func(pid int) (time.Duration, error)
	sum = func(pid int) (time.Duration, error) {
		t, err := readProcTimes(pid)
		if err != nil {
			return 0, err
		}
		total := t.self + t.reaped
		for _, c := range children[pid] {
			if d, err := sum(c); err == nil { // gone since the listing: see above
				total += d
			}
		}
		return total, nil
	}
	return sum(root)
}

// childrenOf lists every process's children, from the parent pid in each
// /proc/<pid>/stat.
func childrenOf() (map[int][]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := readProcTimes(pid)
		if err != nil {
			continue // ended since the listing
		}
		out[t.ppid] = append(out[t.ppid], pid)
	}
	return out, nil
}
