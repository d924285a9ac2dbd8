package actors

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// DependencyFailures is what the records' retried failures said of one
// dependency since the previous TakeFailures: how many attempts failed, how
// many of them the record did not own (the dependency was failing for
// others too: a shared outage), which records they were, and the latest
// error. The listener turns it into a rate-limited warning;
// per-attempt lines stay at debug level.
type DependencyFailures struct {
	Dependency string
	Attempts   int64
	Shared     int64
	// Records names each record that failed, once, as
	// topic/partition@offset (at most maxTalliedRecords of them).
	Records   []string
	LastError string
}

// failureTally collects DependencyFailures between takes (TakeFailures
// empties it). Only records in flight fail, so over one period of the
// listener's takes its record sets hold about the records in flight; a
// bridge nobody takes from (benchmarks, tests) is bounded by
// maxTalliedRecords per dependency, past which records are counted in
// Attempts but not named.
type failureTally struct {
	mu   sync.Mutex
	deps map[string]*tallyEntry
}

type tallyEntry struct {
	DependencyFailures
	records map[recordID]struct{}
}

// maxTalliedRecords bounds the records named per dependency between takes.
const maxTalliedRecords = 10_000

type recordID struct {
	topic     string
	partition int32
	offset    int64
}

// failedAttempt records one retried failure of a record's attempt on
// dependency (RecordsDependency when it named none).
func (d *Dependencies) failedAttempt(dependency string, id recordID, shared bool, err string) {
	if dependency == "" {
		dependency = RecordsDependency
	}
	t := &d.failures
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deps == nil {
		t.deps = map[string]*tallyEntry{}
	}
	e := t.deps[dependency]
	if e == nil {
		e = &tallyEntry{DependencyFailures: DependencyFailures{Dependency: dependency}, records: map[recordID]struct{}{}}
		t.deps[dependency] = e
	}
	e.Attempts++
	if shared {
		e.Shared++
	}
	if len(e.records) < maxTalliedRecords {
		e.records[id] = struct{}{}
	}
	e.LastError = err
}

// TakeFailures returns what failed since the previous call, by dependency
// name, and starts counting afresh.
func (d *Dependencies) TakeFailures() []DependencyFailures {
	t := &d.failures
	t.mu.Lock()
	deps := t.deps
	t.deps = nil
	t.mu.Unlock()
	out := make([]DependencyFailures, 0, len(deps))
	for _, name := range slices.Sorted(maps.Keys(deps)) {
		e := deps[name]
		for id := range e.records {
			e.Records = append(e.Records, fmt.Sprintf("%s/%d@%d", id.topic, id.partition, id.offset))
		}
		slices.Sort(e.Records)
		out = append(out, e.DependencyFailures)
	}
	return out
}
