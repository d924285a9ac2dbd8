package actors

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Dependencies keeps, for each dependency of the handler (database, VMaaS,
// inventory, ...), when it last served a call and how healthy it has been
// lately: a moving average of its call outcomes; when a health check of it
// (a probe) last passed and last failed; and which records failed at it
// last. The partition actors read it to tell a shared outage from a
// record's own failure (see the retry rule in partition_failures.go).
//
// The domain reports each call (Observe), typically from its clients: a
// call that got an answer counts as served, even an answer refusing the
// request; a call that failed for want of one (refused connection, timeout,
// 5xx) as failed. The pipeline itself reports records, under
// RecordsDependency, for failures that name no dependency or one never
// reported. A record retried quickly weighs in each call it makes to a
// named dependency: with the backoff's floor and the calls' own timeouts,
// a few records failing alone stay a small share of a busy dependency's
// calls. Safe for concurrent use; a report costs a clock read and two
// atomic operations.
type Dependencies struct {
	deps sync.Map // name -> *dependencyHealth
	// records is RecordsDependency's entry, kept apart: every record
	// reports to it, and a field costs less than a map lookup.
	records     dependencyHealth
	recordsOnce sync.Once
	// failures tallies retried failures for the listener's warnings.
	failures failureTally
	// marks keeps, per dependency, the latest failures of two different
	// records: is some record other than the one judged failing too?
	marksMu sync.Mutex
	marks   map[string]*failureMarks
}

// RecordsDependency is the entry for the records themselves: a success per
// record handled, a failure per record at its first transient failure.
// Failures that name no dependency, or one never observed, are judged by it.
const RecordsDependency = "(records)"

const (
	// healthWeight is the weight of each new outcome in the moving average:
	// about the last 16 calls count.
	healthWeight = 1.0 / 16
	// healthyShare is the share of recent calls that must have been served
	// for a failure to be read as the record's own: below it, the dependency
	// is failing for many records, an outage shared by all (load shedding
	// included).
	healthyShare = 0.8
)

type dependencyHealth struct {
	lastServed atomic.Int64  // unix nanoseconds of the last served call; 0: none
	health     atomic.Uint64 // float64 bits: moving average of outcomes (1 served, 0 failed); NaN before the first
	// Probe outcomes, unix nanoseconds of when each ended; 0: none. Kept
	// out of the moving average: a probe every second would outweigh the
	// calls of a quiet process.
	probeServed atomic.Int64
	probeFailed atomic.Int64
}

// failureMarks are the latest failure of any record at a dependency and
// the latest of a record other than that one: between them, the latest
// failure of a record other than any given one.
type failureMarks struct {
	last, other failureMark
}

type failureMark struct {
	record recordID
	at     int64 // unix nanoseconds
}

// Observe records one call to dependency: served or failed.
func (d *Dependencies) Observe(dependency string, served bool) {
	h := d.entry(dependency)
	x := 0.0
	if served {
		x = 1
		h.lastServed.Store(time.Now().UnixNano())
	}
	for {
		old := h.health.Load()
		next := x // the first outcome stands alone
		if f := math.Float64frombits(old); !math.IsNaN(f) {
			next = f*(1-healthWeight) + x*healthWeight
		}
		if h.health.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

func (d *Dependencies) entry(dependency string) *dependencyHealth {
	if dependency == RecordsDependency {
		d.recordsOnce.Do(func() { d.records.health.Store(noOutcome) })
		return &d.records
	}
	if v, ok := d.deps.Load(dependency); ok {
		return v.(*dependencyHealth)
	}
	h := &dependencyHealth{}
	h.health.Store(noOutcome)
	v, _ := d.deps.LoadOrStore(dependency, h)
	return v.(*dependencyHealth)
}

// noOutcome is the health of a dependency before its first outcome.
var noOutcome = math.Float64bits(math.NaN())

// Probe records the outcome of a health check of dependency that ended
// now: whether it was served. A probe is the evidence of last resort, for
// a record that failed while no other call reached the dependency: keep it
// on the path the records' calls take, so it fails when they would.
func (d *Dependencies) Probe(dependency string, served bool) {
	h := d.entry(dependency)
	now := time.Now().UnixNano()
	if served {
		h.probeServed.Store(now)
	} else {
		h.probeFailed.Store(now)
	}
}

// ServingSince reports whether dependency has been observed at all (known),
// and whether it is serving: it served a call after t and most of its recent
// calls were served. Probes are not calls: they count in ownFailure alone.
func (d *Dependencies) ServingSince(dependency string, t time.Time) (known, serving bool) {
	h := d.lookup(dependency)
	health := math.NaN()
	if h != nil {
		health = math.Float64frombits(h.health.Load())
	}
	if math.IsNaN(health) {
		return false, false
	}
	return true, h.lastServed.Load() > t.UnixNano() && health >= healthyShare
}

func (d *Dependencies) lookup(dependency string) *dependencyHealth {
	if dependency == RecordsDependency {
		return d.entry(dependency)
	}
	if v, ok := d.deps.Load(dependency); ok {
		return v.(*dependencyHealth)
	}
	return nil
}

// ownFailure judges a transient failure of record at dependency ("" for
// none), the record having last failed (or begun its first attempt) at
// since, and notes the failure for the judgements of other records. The
// failure is the record's own when the dependency it names (the records of
// the process, when it names none or one never observed) is serving:
//   - it served a call since, and most of its recent calls were served; or
//   - otherwise (no call served since, or most recent calls failed: the
//     record's own calls may be all there are; this is what a record that
//     stops its neighbours sees (its partition blocked behind it, partition
//     ordering, the only busy partition)): then a probe of the dependency
//     passed since, none failed since, and no other record failed at it
//     since. What the record blocks is never taken as an outage, and an
//     outage still reads as one: the probe or another record fails.
//
// Without a probe of the dependency, a record failing with no call served
// around it reads as a shared outage, as before probes: retried, never
// dead-lettered.
func (d *Dependencies) ownFailure(dependency string, record recordID, since time.Time) bool {
	name := RecordsDependency
	if dependency != "" {
		if h := d.lookup(dependency); h != nil && h.known() {
			name = dependency
		}
	}
	own := d.judge(name, record, since.UnixNano())
	d.noteFailure(name, record)
	return own
}

func (h *dependencyHealth) known() bool {
	return !math.IsNaN(math.Float64frombits(h.health.Load())) || h.probeServed.Load() != 0 || h.probeFailed.Load() != 0
}

func (d *Dependencies) judge(name string, record recordID, since int64) bool {
	h := d.lookup(name)
	if h == nil {
		return false
	}
	if health := math.Float64frombits(h.health.Load()); !math.IsNaN(health) && h.lastServed.Load() > since && health >= healthyShare {
		return true
	}
	// Served calls since, but most recent calls failed: those may all be
	// the record's own (alone, it makes a served call before its failing
	// one), so they are no evidence of an outage either; the probe and the
	// other records decide, as for a record that saw nothing served.
	return h.probeServed.Load() > since && h.probeFailed.Load() <= since && !d.othersFailedSince(name, record, since)
}

func (d *Dependencies) noteFailure(name string, record recordID) {
	now := time.Now().UnixNano()
	d.marksMu.Lock()
	defer d.marksMu.Unlock()
	if d.marks == nil {
		d.marks = map[string]*failureMarks{}
	}
	m := d.marks[name]
	if m == nil {
		m = &failureMarks{}
		d.marks[name] = m
	}
	if m.last.at != 0 && m.last.record != record {
		m.other = m.last
	}
	m.last = failureMark{record, now}
}

func (d *Dependencies) othersFailedSince(name string, record recordID, since int64) bool {
	d.marksMu.Lock()
	defer d.marksMu.Unlock()
	m := d.marks[name]
	if m == nil {
		return false
	}
	if m.last.record != record {
		return m.last.at > since
	}
	return m.other.at > since
}
