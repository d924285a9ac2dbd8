package actors

import (
	"sync"
	"sync/atomic"
	"time"
)

// Dependencies remembers when each dependency of the handler (database,
// VMaaS, ...) last served a call successfully. The partition actors read it
// to tell a shared outage from a record's own failure: a transient failure
// in a dependency counts towards the record's limit only when that
// dependency served other calls after the failing attempt began.
//
// The domain reports successes (Served), typically from the same hook that
// times its calls; a dependency never reported is never judged healthy, so
// failures naming it are retried without limit, as before. Safe for
// concurrent use; a report costs one clock read and one atomic store.
type Dependencies struct {
	last sync.Map // name -> *atomic.Int64: unix nanoseconds of the last success
}

// Served records that a call to dependency succeeded now.
func (d *Dependencies) Served(dependency string) {
	v, ok := d.last.Load(dependency)
	if !ok {
		v, _ = d.last.LoadOrStore(dependency, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(time.Now().UnixNano())
}

// ServedSince reports whether dependency served a call after t.
func (d *Dependencies) ServedSince(dependency string, t time.Time) bool {
	v, ok := d.last.Load(dependency)
	return ok && v.(*atomic.Int64).Load() > t.UnixNano()
}
