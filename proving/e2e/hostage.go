package e2e

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// pinSlack is what the hostage scenario allows a partition's committed
// offset to stay pinned beyond the listeners' own-failure bound: commits
// every second, the group's first join, the dead-letter write, a loaded
// machine.
const pinSlack = 30 * time.Second

// settingsOf parses env as a listener process would, so the suite judges by
// the values the listeners run with.
func settingsOf(env []string) (*listener.Config, error) {
	vars := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v // a later value wins, as in a process environment built by append
	}
	cfg, _, err := listener.Parse(nil, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	return cfg, err
}

// chooseHostages picks n hosts of the plan for the mock to hold hostage
// (platform.Faults.HangHosts), deterministically: hosts of good events only
// (no bad or skipped message names them), with at least two created or
// updated events, not deleted at the end (so they must end stored, and
// unevaluated), and whose profiles at every revision the mock covers share
// their package list with no revision of any other host the plan sends (the
// mock recognises a hostage's call by its package list alone).
//
// Among those it takes the hosts whose last event comes earliest in the
// stream. The listener counts a transient failure towards a record's limit
// only when the dependency it names served other records meanwhile, which
// is what tells a record's own failure from a shared outage; at the tail of a
// finite stream nothing else is left to succeed, so a hostage record still
// failing there would rightly be retried as a shared outage. Choosing hosts
// whose records fail early, and producing the stream over time
// (hostageStream) so that the rest of it still flows while they fail, is
// what makes their failures their own, as a service with steady traffic
// sees them.
func chooseHostages(plan *loadgen.Plan, ds *platform.Dataset, shape platform.ProfileShape, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	uploads := map[string]int{}   // created and updated events per host
	last := map[string]int{}      // position of each host's last message
	maxRev := map[string]int{}    // highest revision the plan sends per host
	excluded := map[string]bool{} // hosts of bad or skipped messages
	for i, it := range plan.Items {
		last[it.Key] = i
		if it.Bad != "" || it.Skip != "" {
			excluded[it.Key] = true
			continue
		}
		if it.Event.Type != "delete" {
			uploads[it.Key]++
			maxRev[it.Key] = max(maxRev[it.Key], it.Event.Revision)
		}
	}
	var candidates []string
	for id, st := range plan.Expected {
		if uploads[id] >= 2 && !st.Deleted && !st.Filtered && !excluded[id] {
			candidates = append(candidates, id)
		}
	}
	slices.SortFunc(candidates, func(a, b string) int { return last[a] - last[b] })
	// Every package list the plan sends for a host, by host.
	lists := map[string]string{}
	for id := range plan.Expected {
		for rev := 0; rev <= maxRev[id]; rev++ {
			lists[strings.Join(ds.Profile(id, rev, shape).Packages, "\n")] = id
		}
	}
	var chosen []string
	for _, id := range candidates {
		collides := false
		for rev := 0; rev <= platform.HangRevisions && !collides; rev++ {
			owner, sent := lists[strings.Join(ds.Profile(id, rev, shape).Packages, "\n")]
			collides = sent && owner != id
		}
		if !collides {
			chosen = append(chosen, id)
		}
		if len(chosen) == n {
			return chosen, nil
		}
	}
	return nil, fmt.Errorf("only %d of %d hosts fit to be held hostage", len(chosen), n)
}

// trafficAfter is how long the rest of the stream must keep flowing after
// the last hostage record could still be failing: its failures count as its
// own only while the dependency serves other records meanwhile.
const trafficAfter = 10 * time.Second

// hostageStream is how long the run spreads its stream over when hosts are
// held hostage, so that other records keep flowing until each hostage record
// has had its own-failure bound. A hostage's uploads run one after another
// (key ordering), each for up to bound, the last beginning no earlier than it
// is produced: with the stream produced evenly over D, a hostage whose last
// message is at fraction p of it and which has k uploads is dead-lettered by
// p·D + k·bound at the latest, and D must exceed that by trafficAfter. All at
// once, the stream could end before that on a fast machine: its last hostage
// record, failing with nothing else left to succeed, is then rightly retried
// as a shared outage, and its partition stays pinned to the end of the run.
func hostageStream(plan *loadgen.Plan, hostages []string, bound time.Duration) (time.Duration, error) {
	uploads, last := map[string]int{}, map[string]int{}
	for i, it := range plan.Items {
		if slices.Contains(hostages, it.Key) {
			last[it.Key] = i
			if it.Bad == "" && it.Skip == "" && it.Event.Type != "delete" {
				uploads[it.Key]++
			}
		}
	}
	var d float64 // seconds
	n := float64(len(plan.Items))
	for _, id := range hostages {
		left := 1 - float64(last[id]+1)/n // the share of the stream after its last message
		d = max(d, (time.Duration(uploads[id])*bound+trafficAfter).Seconds()/left)
	}
	if !(d <= maxStream.Seconds()) { // a hostage's last message ends the stream: +Inf
		return 0, fmt.Errorf("the hostages' records come too late in the stream: it would have to last %.0fs to let them fail on their own, more than %v", d, maxStream)
	}
	return time.Duration(math.Ceil(d)) * time.Second, nil
}

// maxStream bounds hostageStream: the run gives up after 6 minutes.
const maxStream = 2 * time.Minute

// hostageUploads counts the created and updated events of the hostages: each
// asks VMaaS, so each must be dead-lettered.
func hostageUploads(plan *loadgen.Plan, hostages []string) int {
	n := 0
	for _, it := range plan.Items {
		if it.Bad == "" && it.Skip == "" && it.Event.Type != "delete" && slices.Contains(hostages, it.Key) {
			n++
		}
	}
	return n
}

// judgeHostageLetters checks the dead letters that are not the plan's broken
// messages: each must be a hostage's record, dead-lettered as a transient
// failure of its own (own_failures at least the listeners' limit) with a
// history naming VMaaS in every entry; every created or updated event of a
// hostage must be there. It returns the problems found.
func judgeHostageLetters(others []deadLetter, hostages []string, wantUploads, maxAttempts int) []string {
	var problems []string
	more := 0
	bad := func(format string, args ...any) {
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	per := map[string]int{}
	for _, d := range others {
		l := d.letter
		key := string(l.GetKey())
		where := fmt.Sprintf("dead letter of %d/%d (key %s)", l.GetOriginalPartition(), l.GetOriginalOffset(), key)
		if !slices.Contains(hostages, key) {
			bad("%s: not a hostage's record (%s: %s)", where, d.reason, l.GetError())
			continue
		}
		per[key]++
		if l.GetErrorClass() != messages.ErrorClass_ERROR_CLASS_TRANSIENT || d.reason != string(messages.ReasonTransient) {
			bad("%s: class %s, reason %q, want TRANSIENT, %q (%s)", where, l.GetErrorClass(), d.reason, messages.ReasonTransient, l.GetError())
		}
		if int(l.GetOwnFailures()) < maxAttempts {
			bad("%s: %d own failures, the limit is %d", where, l.GetOwnFailures(), maxAttempts)
		}
		if len(l.GetHistory()) == 0 {
			bad("%s: no history", where)
		}
		for _, f := range l.GetHistory() {
			if f.GetDependency() != clients.DependencyVMaaS {
				bad("%s: attempt %d names dependency %q, want %q (%s)", where, f.GetAttempt(), f.GetDependency(), clients.DependencyVMaaS, f.GetError())
				break
			}
		}
	}
	for _, id := range hostages {
		if per[id] == 0 {
			bad("hostage %s has no dead letter", id)
		}
	}
	if more > 0 {
		problems = append(problems, fmt.Sprintf("%d more such problems", more))
	}
	if got := len(others); got != wantUploads {
		problems = append(problems, fmt.Sprintf("%d records dead-lettered besides the broken messages, want %d (every created or updated event of the hostages)", got, wantUploads))
	}
	return problems
}
