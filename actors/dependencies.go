package actors

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Dependencies keeps, for each dependency of the handler (database, VMaaS,
// inventory, ...), when it last served a call and how healthy it has been
// lately: a moving average of its call outcomes. The partition actors read
// it to tell a shared outage from a record's own failure (see the retry rule
// in partition_failures.go).
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

// ServingSince reports whether dependency has been observed at all (known),
// and whether it is serving: it served a call after t and most of its recent
// calls were served.
func (d *Dependencies) ServingSince(dependency string, t time.Time) (known, serving bool) {
	var h *dependencyHealth
	if dependency == RecordsDependency {
		h = d.entry(dependency)
	} else if v, ok := d.deps.Load(dependency); ok {
		h = v.(*dependencyHealth)
	}
	health := math.NaN()
	if h != nil {
		health = math.Float64frombits(h.health.Load())
	}
	if math.IsNaN(health) {
		return false, false
	}
	return true, h.lastServed.Load() > t.UnixNano() && health >= healthyShare
}
