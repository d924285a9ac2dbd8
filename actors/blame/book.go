// Package blame decides whose a failed attempt is: the record's own, which
// counts towards its dead letter, or a trouble the records share (an outage,
// a dependency shedding load), which never does. It is a plain data
// structure with explicit time: no actor, Kafka or I/O; the partition actor
// drives it, and a model test drives it the same way in virtual time.
//
// The rule (docs/architecture.md, "Whose failure"):
//
//  1. Evidence is like the failure and not blocked by it. A failure of a
//     record at dependency D at time t opens a Case. Only calls to D that
//     start within the evidence window after t, made by other records (never
//     the record itself, never a call no record is known to have made), and
//     health checks of D that start within it, are evidence. A record held
//     back by the failing one cannot call, so what it blocks is silence, and
//     silence is no evidence.
//  2. A case is judged once ripe (Enough other records were heard, or its
//     window closed): a failed check, or at least two other records failing
//     while fewer than four times as many were served, is Shared; at least
//     three served and four times as many as failed is Own; a passed check
//     with at most one other record failing is Own; anything else is
//     NoEvidence (the record is held, never dead-lettered on a guess).
//  3. A failure that names no dependency, or one nobody reported calls or
//     checks of, is judged by the handler's own outcomes (Handler): other
//     records handled are served calls, other records failing are failed
//     ones. A handler that classifies nothing is never punished for an
//     outage.
//  4. A Shared verdict or a failed check puts D in outage; records failing
//     at D then wait for its recovery (Await) as well as their backoff. Each
//     served call or passed check that started after the outage's latest
//     failure releases two of them: recovery wakes the waiters at the pace
//     the dependency serves them (doubling each round trip), not at the end
//     of their backoff; a false recovery wakes only as many as are served.
//
// What it cannot tell apart: a partial outage the health check does not
// exercise, hitting only the records in flight when no other record calls
// the same path (the check then says serving); and a dependency that
// recovers within the window of a failure nobody else called it in.
package blame

import (
	"sync"
	"sync/atomic"
	"time"
)

// Handler is the dependency name under which the handler's own outcomes are
// booked: one call per attempt, served when the record was handled (done,
// skipped or refused as broken), failed when the attempt failed in any other
// way. Failures naming no dependency, or one never reported, are judged by it.
const Handler = "(handler)"

// Source is who made a call: the record whose attempt made it. The zero
// Source (no topic) is a call no record is known to have made: it counts for
// a dependency's recovery, never as evidence in a case.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

func (s Source) known() bool { return s.Topic != "" }

// Verdict is how a failure was judged.
type Verdict int

const (
	// Pending: the case is not ripe yet; judge again at Case.Until.
	Pending Verdict = iota
	// Own: others were served just after it; counts towards the dead letter.
	Own
	// Shared: the dependency failed for others too; never counts.
	Shared
	// NoEvidence: nothing like it was heard in its window; the record is held.
	NoEvidence
	// Congestion: spent waiting for what every record shares; never counts.
	Congestion
)

func (v Verdict) String() string {
	switch v {
	case Pending:
		return "pending"
	case Own:
		return "own"
	case Shared:
		return "shared"
	case NoEvidence:
		return "no evidence"
	case Congestion:
		return "congestion"
	}
	return "unknown"
}

// Config tunes the rule.
type Config struct {
	// Window is how long after a failure the calls that start count as its
	// evidence; a dependency whose calls take longer gets twice its mean
	// call time. Keep it above the health checks' interval, so a check
	// starts within every window.
	Window time.Duration
	// Enough is how many other records heard make a case ripe before its
	// window closes.
	Enough int
}

// DefaultConfig is the rule as the listener runs it.
func DefaultConfig() Config { return Config{Window: 1500 * time.Millisecond, Enough: 8} }

const (
	// maxSeen bounds the sources a case remembers: past it the case has
	// more than it needs to judge.
	maxSeen = 64
	// releaseStep is how many waiters a served call releases during a
	// recovery.
	releaseStep = 2
	// callWeight is the weight of a new call in a dependency's mean call time.
	callWeight = 1.0 / 16
)

// Book holds the evidence: for each dependency, the open cases and its
// outage state. Safe for concurrent use; a call reported while a dependency
// has no open case and no outage costs a map lookup and a few atomic
// operations.
type Book struct {
	cfg  Config
	deps sync.Map // name -> *dep
}

// NewBook returns a Book judging by cfg (zero fields take DefaultConfig's).
func NewBook(cfg Config) *Book {
	def := DefaultConfig()
	if cfg.Window <= 0 {
		cfg.Window = def.Window
	}
	if cfg.Enough <= 0 {
		cfg.Enough = def.Enough
	}
	return &Book{cfg: cfg}
}

// Config returns the rule's configuration.
func (b *Book) Config() Config { return b.cfg }

type dep struct {
	known    atomic.Bool
	meanCall atomic.Int64 // nanoseconds, moving average of call durations; 0 before the first
	// attention is set while the dependency has open cases, an outage or
	// waiters: its calls must be looked at under mu.
	attention atomic.Bool

	mu       sync.Mutex
	cases    map[*Case]struct{}
	outage   bool
	since    time.Time // when the outage's latest failure began
	waiters  []*waiter
	released int64 // waiters released, ever (for tests and metrics)
}

type waiter struct {
	wake func()
	done bool
}

func (b *Book) dep(name string) *dep {
	if v, ok := b.deps.Load(name); ok {
		return v.(*dep)
	}
	v, _ := b.deps.LoadOrStore(name, &dep{cases: map[*Case]struct{}{}})
	return v.(*dep)
}

// Known reports whether calls or checks of dependency were ever reported.
func (b *Book) Known(dependency string) bool {
	if v, ok := b.deps.Load(dependency); ok {
		return v.(*dep).known.Load()
	}
	return false
}

// Resolve returns the dependency a failure naming named is judged by: named
// when it is known, else Handler.
func (b *Book) Resolve(named string) string {
	if named != "" && named != Handler && b.Known(named) {
		return named
	}
	return Handler
}

// Call books one call to dependency by src that ran from start to end:
// served (it got an answer, even a refusal) or not.
func (b *Book) Call(dependency string, src Source, start, end time.Time, served bool) {
	d := b.dep(dependency)
	if !d.known.Load() {
		d.known.Store(true)
	}
	d.observeDuration(end.Sub(start))
	if !d.attention.Load() {
		return
	}
	d.mu.Lock()
	if src.known() {
		for c := range d.cases {
			c.heard(src, start, served)
		}
	}
	wake := d.afterCall(start, served, src.known())
	d.mu.Unlock()
	for _, w := range wake {
		w()
	}
}

// Check books one health check of dependency that ran from start to end. A
// check is evidence for the cases whose window it started in: keep it on
// the path the records' calls take (a check that passes while they fail
// would have records dead-lettered in an outage).
func (b *Book) Check(dependency string, start, end time.Time, served bool) {
	d := b.dep(dependency)
	if !d.known.Load() {
		d.known.Store(true)
	}
	d.mu.Lock()
	for c := range d.cases {
		c.checked(start, served)
	}
	var wake []func()
	if served {
		wake = d.afterCall(start, true, false)
	} else {
		d.enterOutage(start)
	}
	d.mu.Unlock()
	for _, w := range wake {
		w()
	}
}

func (d *dep) observeDuration(took time.Duration) {
	if took < 0 {
		return
	}
	for {
		old := d.meanCall.Load()
		next := int64(took)
		if old > 0 {
			next = old + int64(float64(int64(took)-old)*callWeight)
		}
		if d.meanCall.CompareAndSwap(old, next) {
			return
		}
	}
}

// afterCall follows the outage state after a call that started at start;
// it returns the waiters to wake. Under d.mu. A served call that started
// after the outage's latest failure releases releaseStep waiters (the
// outage ends when none is left); a failed one moves that latest failure,
// so the calls still under way from before it release nothing. Waiters
// therefore come back at the pace the dependency serves them: two per
// success, each failure sending its record back to wait.
func (d *dep) afterCall(start time.Time, served, attributed bool) []func() {
	if !d.outage || start.Before(d.since) {
		return nil
	}
	if !served {
		if attributed {
			d.since = start
		}
		return nil
	}
	wake := d.releaseWaiters(releaseStep)
	if d.liveWaiters() == 0 {
		d.outage = false
		d.waiters = nil
		d.updateAttention()
	}
	return wake
}

func (d *dep) enterOutage(at time.Time) {
	if !d.outage || at.After(d.since) {
		d.since = at
	}
	d.outage = true
	d.attention.Store(true)
}

func (d *dep) updateAttention() {
	d.attention.Store(len(d.cases) > 0 || d.outage || len(d.waiters) > 0)
}

func (d *dep) releaseWaiters(n int) []func() {
	var wake []func()
	for len(d.waiters) > 0 && len(wake) < n {
		w := d.waiters[0]
		d.waiters = d.waiters[1:]
		if w.done {
			continue
		}
		w.done = true
		d.released++
		wake = append(wake, w.wake)
	}
	return wake
}

func (d *dep) liveWaiters() int {
	n := 0
	for _, w := range d.waiters {
		if !w.done {
			n++
		}
	}
	return n
}

// Outage reports whether dependency is in an outage: a case of it was
// judged Shared, or its check failed, and it has not served since.
func (b *Book) Outage(dependency string) bool {
	v, ok := b.deps.Load(dependency)
	if !ok {
		return false
	}
	d := v.(*dep)
	if !d.attention.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.outage
}

// Await registers wake to be called once when dependency recovers from its
// outage (in the order waiters came, a few per served call); ok is false,
// and nothing is registered, when it is not in an outage. cancel withdraws
// the registration; calling it after the wake is harmless. wake runs on the
// goroutine that reported the recovering call and must not block.
func (b *Book) Await(dependency string, wake func()) (cancel func(), ok bool) {
	d := b.dep(dependency)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.outage {
		return func() {}, false
	}
	w := &waiter{wake: wake}
	d.waiters = append(d.waiters, w)
	d.attention.Store(true)
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if w.done {
			return
		}
		w.done = true
		// Drop finished waiters from the front, so cancelled ones do not pile up.
		for len(d.waiters) > 0 && d.waiters[0].done {
			d.waiters = d.waiters[1:]
		}
		if d.liveWaiters() == 0 {
			d.waiters = nil
		}
		d.updateAttention()
	}, true
}

// Waiting returns how many records wait for dependency's recovery, and how
// many were ever released by one.
func (b *Book) Waiting(dependency string) (waiting int, released int64) {
	d := b.dep(dependency)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.liveWaiters(), d.released
}
