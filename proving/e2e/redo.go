package e2e

import (
	"slices"

	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// Which listener process evaluated which event. The mock records every VMaaS
// evaluation it answers with the caller (each listener process has its own
// VMAAS_URL path, see run.startListenerWith) and the profile evaluated (the
// fingerprint of the package list), but not the event: half the events of a
// stream evaluate a profile another event of the same host evaluates too (a
// revision that updated no package, an event carrying only the host id, which
// evaluates revision 0 again). The events are told apart by their order: a
// host's events are evaluated in stream order (key order: one record of a key
// at a time, in offset order, and a host's records share a partition), so
// what one process evaluates of a host is a run of consecutive events of it,
// starting at the first it did not know finished, and a process that
// evaluates again what an earlier one did starts again at an earlier event.
// attributeEvaluations lays each process's calls for a host over the host's
// planned events, in runs.

// plannedEvaluations returns, for each host, the profiles its events
// evaluate in stream order: every created or updated event that is neither
// broken, nor to be skipped, nor a hostage's (those are never answered).
// An event carrying only the host id evaluates revision 0, which the mock's
// inventory serves.
func plannedEvaluations(plan *loadgen.Plan, ds *platform.Dataset, shape platform.ProfileShape, hostages []string) map[string][]string {
	out := map[string][]string{}
	for _, it := range plan.Items {
		ev := it.Event
		if it.Bad != "" || it.Skip != "" || ev.Type == "delete" || slices.Contains(hostages, ev.HostID) {
			continue
		}
		rev := ev.Revision
		if ev.IDOnly {
			rev = 0
		}
		out[ev.HostID] = append(out[ev.HostID], platform.Fingerprint(ds.Profile(ev.HostID, rev, shape).Packages))
	}
	return out
}

// evaluationLedger is which process evaluated which planned event.
type evaluationLedger struct {
	// by[host][i] lists the processes (indices in start order) that
	// evaluated the host's event i, in the order they did.
	by map[string][][]int
	// Unplanned counts answered calls whose profile no planned event
	// evaluates, or from a caller not listed; Jumps, runs that started past
	// an event nobody had evaluated yet (that event evaluated later, or
	// never). Either is a process out of key order, a stream the plan does
	// not describe, or a flaw of this attribution.
	Unplanned, Jumps int
}

// attributeEvaluations assigns each answered evaluation to a planned event.
// processes lists the callers in the order they started; a process's calls
// are taken in the order the mock answered them. For each process and host,
// its calls are cut into runs, each laid over the host's events at the start
// where the longest run fits: among equally long fits the latest start not
// past the first event nobody evaluated yet (the reach), else the earliest
// past it. Preferring the latest start reads an ambiguous call as new work
// rather than work redone: the figure errs in the listener's favour only
// where the stream itself is ambiguous, and each such run still ends where
// the host's later calls continue.
func attributeEvaluations(planned map[string][]string, processes []string, calls []platform.Evaluation) *evaluationLedger {
	hostOf := map[string]string{}
	for host, profiles := range planned {
		for _, p := range profiles {
			hostOf[p] = host // a package list of 40 of 3,000 packages: no two hosts share one
		}
	}
	index := map[string]int{}
	for i, name := range processes {
		index[name] = i
	}
	// byProcess[j][host] is process j's calls for host, in answer order.
	byProcess := make([]map[string][]string, len(processes))
	for i := range byProcess {
		byProcess[i] = map[string][]string{}
	}
	l := &evaluationLedger{by: map[string][][]int{}}
	for host, profiles := range planned {
		l.by[host] = make([][]int, len(profiles))
	}
	for _, c := range calls {
		j, known := index[c.Caller]
		host, planned := hostOf[c.Profile]
		if !known || !planned {
			l.Unplanned++
			continue
		}
		byProcess[j][host] = append(byProcess[j][host], c.Profile)
	}
	reach := map[string]int{}
	for j := range processes {
		for host, got := range byProcess[j] {
			want := planned[host]
			for pos := 0; pos < len(got); {
				start, n := bestRun(want, got[pos:], reach[host]) // n ≥ 1: got[pos] is one of want
				if start > reach[host] {
					l.Jumps++
				}
				for i := start; i < start+n; i++ {
					l.by[host][i] = append(l.by[host][i], j)
				}
				reach[host] = max(reach[host], start+n)
				pos += n
			}
		}
	}
	return l
}

// bestRun returns where the longest prefix of got fits in want, and its
// length (0 when got[0] is not in want): ties go to the latest start at or
// before reach, then to the earliest after it.
func bestRun(want, got []string, reach int) (start, n int) {
	start = -1
	for s := range want {
		k := 0
		for k < len(got) && s+k < len(want) && want[s+k] == got[k] {
			k++
		}
		switch {
		case k == 0:
		case k > n, k == n && s <= reach:
			start, n = s, k
		}
	}
	return start, n
}

// Redone returns, for each process, how many events it evaluated that a
// later process evaluated again: work the process did that its end (a kill)
// made another do again.
func (l *evaluationLedger) Redone(processes int) []int {
	out := make([]int, processes)
	for _, events := range l.by {
		for _, who := range events {
			for k, j := range who {
				if slices.ContainsFunc(who[k+1:], func(later int) bool { return later > j }) &&
					!slices.Contains(who[k+1:], j) { // counted once, at the process's last evaluation of it
					out[j]++
				}
			}
		}
	}
	return out
}

// Repeats returns the evaluations beyond the first of each event, and how
// many planned events no process evaluated.
func (l *evaluationLedger) Repeats() (repeats, unevaluated int) {
	for _, events := range l.by {
		for _, who := range events {
			if len(who) == 0 {
				unevaluated++
			} else {
				repeats += len(who) - 1
			}
		}
	}
	return repeats, unevaluated
}
