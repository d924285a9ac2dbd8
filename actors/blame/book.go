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
//     other records (never the record itself, never a call no record is
//     known to have made) start within the first third of the evidence
//     window after t, and health checks of D that start within the window,
//     are evidence. A record held back by the failing one cannot call, so
//     what it blocks is silence, and silence is no evidence. A record's call
//     speaks for what its attempt met at D: its being served is settled
//     when the attempt ends (Record.Fail, Record.Done), and undone if it
//     failed at D.
//  2. A case is judged once ripe (Enough other records were heard, or its
//     window closed), by the first Enough records heard, each by its first
//     call in the window (Judge). A record already failing at D when this
//     one failed is a suspect: its being served (once its attempt got past
//     D) says the trouble was shared and has passed; its failing again says
//     little while fresh records are served (it is another bad record), and
//     much when none are (an outage).
//  3. A failure that names no dependency, or one nobody reported calls or
//     checks of, is judged by the handler's own outcomes (Handler): other
//     records handled are served calls, other records failing are failed
//     ones. One naming a dependency nobody reports also hears the other
//     failures naming it, all of them through the window's first third,
//     and is held while any fails there: the records handled meanwhile say
//     nothing of a service only some of them need. A handler that
//     classifies nothing is never punished for an outage that fails every
//     record. A failure that could not connect (CauseUnreachable) is never
//     the record's own, whatever judges it: no record's content refuses a
//     connection.
//  4. Where nothing could be heard, the verdict is NoEvidence: the record is
//     held, retried and reported by its owner, never dead-lettered on a
//     guess.
//  5. A failed check puts D in outage until a check passes; a Shared
//     verdict, for a window past it (the outage lasts while they keep
//     coming: load shedding, bursts). A failure at D during an outage is
//     Shared at once, and its record waits for D to serve (Await) as well as
//     for its backoff. Each served call or passed check that started after
//     D's latest failure releases four waiters: recovery wakes them at the
//     pace the dependency serves them (four times as many each round trip),
//     not at the end of their backoff; a false recovery wakes only as many
//     as are served.
//
// What it cannot tell apart (docs/architecture.md lists them with their
// odds): a failure just before a recovery no other record saw; a check that
// passes by luck under load shedding; a partial outage the health check
// does not exercise, hitting only records no fresh record calls beside;
// several bad records failing together beside a passing check (held).
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
	// releaseStep is how many waiters a served call releases during a
	// recovery: the wave grows that many times each round trip. Two took
	// seven round trips for the 140 records one listener held through a
	// 10 s VMaaS outage (1.1 s back to full throughput, end to end); four,
	// under four.
	releaseStep = 4
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
	name string
	// outcomes: the dependency is Handler, whose calls are attempts' outcomes.
	outcomes bool
	known    atomic.Bool
	meanCall atomic.Int64 // nanoseconds, moving average of served calls' durations; 0 before the first
	// attention is set while the dependency has open cases, waiters or
	// records failing at it: its calls must be looked at under mu.
	attention atomic.Bool

	mu    sync.Mutex
	cases map[*Case]struct{}
	until time.Time // the outage lasts until then
	since time.Time // when the latest failure (while anyone waited) began
	// checkFailed is when the latest failed check began; checkDown is set
	// from a failed check until a check passes again.
	checkFailed time.Time
	checkDown   bool
	// failing holds, for each record failing at the dependency now, when
	// its run of failures began: a record failing when another failed is a
	// suspect in the other's case.
	failing map[Source]time.Time
	// lastServed holds, for records failing here, when their latest call
	// here that was served began: an attempt of theirs that began before
	// it and did not fail here got past (Book.settle).
	lastServed map[Source]time.Time
	waiters    []*waiter
	released   int64 // waiters released, ever (for tests and metrics)
}

type waiter struct {
	wake func()
	done bool
}

func (b *Book) dep(name string) *dep {
	if v, ok := b.deps.Load(name); ok {
		return v.(*dep)
	}
	v, _ := b.deps.LoadOrStore(name, &dep{name: name, outcomes: name == Handler, cases: map[*Case]struct{}{},
		failing: map[Source]time.Time{}, lastServed: map[Source]time.Time{}})
	return v.(*dep)
}

// settle books how src's attempt that started at started ended, in the open
// cases of every dependency: failed at failedAt (nil: handled, or failed
// where no case is open), or not.
func (b *Book) settle(src Source, started time.Time, failedAt *dep) {
	b.deps.Range(func(_, v any) bool {
		d := v.(*dep)
		if !d.attention.Load() {
			return true
		}
		d.mu.Lock()
		for c := range d.cases {
			c.settle(src, started, d == failedAt)
		}
		if served, ok := d.lastServed[src]; ok && d != failedAt && !served.Before(started) {
			// Its run of failures here ended (its attempt got past, case
			// or no case to hear it): its calls are fresh again, and it
			// is no longer failing here.
			delete(d.failing, src)
			delete(d.lastServed, src)
			d.updateAttention()
		}
		d.mu.Unlock()
		return true
	})
}

// Known reports whether calls or checks of dependency were ever reported.
func (b *Book) Known(dependency string) bool {
	if v, ok := b.deps.Load(dependency); ok {
		return v.(*dep).known.Load()
	}
	return false
}

// Resolve returns the dependency whose outage a failure naming named is
// in: named, or Handler when it names none.
func (b *Book) Resolve(named string) string {
	if named == "" {
		return Handler
	}
	return named
}

// Call books one call to dependency by src that ran from start to end:
// served (it got an answer, even a refusal) or not.
func (b *Book) Call(dependency string, src Source, start, end time.Time, served bool) {
	d := b.dep(dependency)
	if !d.known.Load() {
		d.known.Store(true)
	}
	if served {
		// Only served calls say how long the dependency takes: a failing
		// record's hung calls stretched every case's window (its own
		// among them) to twice the attempt timeout.
		d.observeDuration(end.Sub(start))
	}
	if !d.attention.Load() {
		return
	}
	d.mu.Lock()
	if src.known() {
		for c := range d.cases {
			c.hear(src, start, served)
		}
		if _, failing := d.failing[src]; failing && served && start.After(d.lastServed[src]) {
			d.lastServed[src] = start
		}
	}
	wake := d.afterCall(start, served)
	d.mu.Unlock()
	for _, w := range wake {
		w()
	}
}

// namedFailure books src's attempt failing at dependency, which nobody
// reports, at at: the cases of other failures there (judged by the
// handler's outcomes) hear it.
func (b *Book) namedFailure(dependency string, src Source, at time.Time) {
	d := b.dep(Handler)
	if !d.attention.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.cases {
		if c.named == dependency {
			c.hearNamed(src, at)
		}
	}
}

// Check books one health check of dependency that ran from start to end. A
// check is evidence for the cases whose window it started in: keep it on
// the path the records' calls take (a check that passes while they fail
// would have records dead-lettered in an outage). A failed one puts the
// dependency in outage for a window.
func (b *Book) Check(dependency string, start, end time.Time, served bool) {
	d := b.dep(dependency)
	if !d.known.Load() {
		d.known.Store(true)
	}
	d.mu.Lock()
	for c := range d.cases {
		c.checked(start, served)
	}
	if served {
		if start.After(d.checkFailed) {
			d.checkDown = false
		}
	} else {
		d.enterOutage(start, end.Add(b.cfg.Window))
		if start.After(d.checkFailed) {
			d.checkFailed, d.checkDown = start, true
		}
	}
	wake := d.afterCall(start, served)
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

// afterCall follows a call (or check) that started at start; it returns
// the waiters to wake. Under d.mu. A failed one is the dependency's latest
// failure; a served one that started after it releases releaseStep waiters,
// so the waiters come back at the pace the dependency serves them: four per
// success, none for the calls still under way from before a failure.
func (d *dep) afterCall(start time.Time, served bool) []func() {
	if len(d.waiters) == 0 {
		return nil
	}
	if !served {
		if start.After(d.since) {
			d.since = start
		}
		return nil
	}
	if start.Before(d.since) {
		return nil
	}
	wake := d.releaseWaiters(releaseStep)
	if d.liveWaiters() == 0 {
		d.waiters = nil
		d.updateAttention()
	}
	return wake
}

// enterOutage puts the dependency in outage from at until until (extended,
// never shortened). Under d.mu.
func (d *dep) enterOutage(at, until time.Time) {
	if until.After(d.until) {
		d.until = until
	}
	if at.After(d.since) {
		d.since = at
	}
}

func (d *dep) updateAttention() {
	d.attention.Store(len(d.cases) > 0 || len(d.waiters) > 0 || len(d.failing) > 0)
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

// Outage reports whether dependency is in an outage at now: its check
// failed and none passed since, or a case of it was judged Shared within a
// window before.
func (b *Book) Outage(dependency string, now time.Time) bool {
	v, ok := b.deps.Load(dependency)
	if !ok {
		return false
	}
	d := v.(*dep)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inOutage(now)
}

func (d *dep) inOutage(now time.Time) bool { return d.checkDown || now.Before(d.until) }

// Await registers wake to be called once when dependency, in an outage at
// at (a record's failure), serves again: released in the order waiters
// came, four per served call. ok is false, and nothing is registered, when
// it is not in an outage. cancel withdraws the registration; calling it
// after the wake is harmless. wake runs on the goroutine that reported the
// serving call and must not block.
func (b *Book) Await(dependency string, at time.Time, wake func()) (cancel func(), ok bool) {
	return b.dep(dependency).await(at, wake)
}

func (d *dep) await(at time.Time, wake func()) (cancel func(), ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inOutage(at) {
		return func() {}, false
	}
	if at.After(d.since) {
		d.since = at // only what the dependency serves after this failure wakes it
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
