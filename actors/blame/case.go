package blame

import "time"

// Case is the evidence gathered about one failure: what other records' calls
// to its dependency, and its health checks, said in the window after it.
type Case struct {
	d *dep // whose calls and checks are its evidence
	// outage is the dependency a Shared verdict puts in outage: d, or the
	// unreported dependency named, whose failures (heardNamed) are
	// evidence too.
	outage *dep
	named  string
	// unreachable: the failure could not connect (CauseUnreachable).
	unreachable bool
	self        Source
	at          time.Time // the failure
	until       time.Time // the window's end: checks starting after it are not evidence
	heard       time.Time // the end of the first third of the window: records' calls starting after it are not evidence
	// enough is how many records heard make the case ripe early.
	enough int

	// Under d.mu:
	seen       map[Source]*heard // records heard, by their first call in the window
	namedFails map[Source]struct{}
	// checkPassed, checkFailed: a check that started in the window passed,
	// failed.
	checkPassed, checkFailed bool
	// steadyBefore: no check failed in the two windows before the failure.
	steadyBefore  bool
	verdict       Verdict // final once not Pending
	closed        bool
	dependencyKey string
}

// Open starts gathering evidence about a failure of self at dependency at
// at, judged by the dependency's calls and checks (Record.Fail picks what
// judges a record's failure). Close it once it is judged or its record ends.
func (b *Book) Open(dependency string, self Source, at time.Time) *Case {
	d := b.dep(dependency)
	return b.open(d, d, "", false, self, at)
}

// open starts a case judged by d's evidence, whose Shared verdict puts
// outage in outage; named is the unreported dependency it names, if any;
// unreachable, whether the failure could not connect.
func (b *Book) open(d, outage *dep, named string, unreachable bool, self Source, at time.Time) *Case {
	window := b.cfg.Window
	if mean := time.Duration(d.meanCall.Load()); 2*mean > window {
		// Calls that start within the window end after it: wait for them.
		window = 2 * mean
	}
	key := named
	if key == "" {
		key = d.name
	}
	c := &Case{d: d, outage: outage, named: named, unreachable: unreachable, self: self, at: at, until: at.Add(window), heard: at.Add(window / 3), enough: b.cfg.Enough,
		seen: map[Source]*heard{}, dependencyKey: key}
	d.mu.Lock()
	c.steadyBefore = d.checkFailed.Before(at.Add(-2 * window))
	d.cases[c] = struct{}{}
	d.attention.Store(true)
	d.mu.Unlock()
	return c
}

// Dependency returns the dependency the case is about.
func (c *Case) Dependency() string { return c.dependencyKey }

// Until returns the end of the case's window: it is ripe then at the latest.
func (c *Case) Until() time.Time { return c.until }

// heard is what one record's first call in a case's window said.
type heard struct {
	start   time.Time
	suspect bool // failing at the dependency when the case's record failed
	served  bool
	// settled: the attempt that made a served call got past the dependency
	// (it ended, failing elsewhere or not at all). Until then a suspect's
	// served call says nothing: a record served by a read and failing at
	// its write has not got through, and taking its read for a recovery
	// had two bad records blind each other for ever. A fresh record's
	// served call counts at once; its attempt failing at the dependency
	// turns it into a failure (settle).
	settled bool
}

// hear books src's call that started at start: evidence when it started
// within the first third of the window (what others met just after the
// failure; a record heard only later may have met a dependency recovered
// meanwhile). Under d.mu.
func (c *Case) hear(src Source, start time.Time, served bool) {
	if c.verdict != Pending || src == c.self || start.Before(c.at) || start.After(c.heard) {
		return
	}
	if _, ok := c.seen[src]; ok || len(c.seen) >= c.enough {
		// A record's first call in the window speaks for it, and the first
		// Enough records heard speak for the case: the verdict is about the
		// moments just after the failure, not a recovery (or an outage)
		// later in the window.
		return
	}
	since, failing := c.d.failing[src]
	// The handler's outcomes are booked when an attempt ends: settled.
	c.seen[src] = &heard{start: start, suspect: failing && !since.After(c.at), served: served, settled: c.d.outcomes}
}

// hearNamed books src's failure at the unreported dependency the case
// names, at at: evidence when it is in the first third of the window, every
// record counted (not only the first Enough heard). Under d.mu.
func (c *Case) hearNamed(src Source, at time.Time) {
	if c.verdict != Pending || src == c.self || at.Before(c.at) || at.After(c.heard) {
		return
	}
	if c.namedFails == nil {
		c.namedFails = map[Source]struct{}{}
	}
	c.namedFails[src] = struct{}{}
}

// settle books how the attempt of src that started at started ended: failed
// at this case's dependency (its served call there did not get it through)
// or not. Under d.mu.
func (c *Case) settle(src Source, started time.Time, failedHere bool) {
	h := c.seen[src]
	if c.verdict != Pending || h == nil || !h.served || h.start.Before(started) {
		return
	}
	if failedHere {
		h.served = false
	}
	h.settled = true
}

// checked books a health check that started at start. Under d.mu.
func (c *Case) checked(start time.Time, served bool) {
	if c.verdict != Pending {
		return
	}
	if !served && start.Before(c.at) && !start.Before(c.at.Add(-2*c.until.Sub(c.at))) {
		c.steadyBefore = false // a check that began before the failure, reported after it opened
	}
	if start.Before(c.at) || start.After(c.until) {
		return
	}
	if served {
		c.checkPassed = true
	} else {
		c.checkFailed = true
	}
}

// Verdict judges the case at now: Pending until it is ripe (enough records
// heard, or its window closed), then final. A Shared verdict puts the
// dependency in outage for a window.
func (c *Case) Verdict(now time.Time) Verdict {
	v, outageUntil := c.judge(now)
	if !outageUntil.IsZero() {
		o := c.outage
		o.mu.Lock()
		o.enterOutage(c.at, outageUntil)
		o.mu.Unlock()
	}
	return v
}

// judge is Verdict under c.d.mu; a Shared verdict returns when the outage
// it starts ends.
func (c *Case) judge(now time.Time) (Verdict, time.Time) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.verdict != Pending {
		return c.verdict, time.Time{}
	}
	if now.Before(c.until) && (len(c.seen) < c.enough || (c.named != "" && now.Before(c.heard))) {
		// Failures naming an unreported dependency are heard through the
		// first third of the window, however many records were heard.
		return Pending, time.Time{}
	}
	// The check speaks for the path only if it has been passing: none failed
	// in the two windows before the failure either (one lucky pass of a
	// dependency shedding half its calls is no evidence).
	e := c.evidenceLocked()
	e.CheckPassed = e.CheckPassed && c.steadyBefore
	c.verdict = Judge(e)
	if c.verdict != Shared {
		return c.verdict, time.Time{}
	}
	// The outage lasts a window past the verdict (past the window's end,
	// for a verdict judged late): a failure made in a short lull of a
	// trouble that keeps coming is shared too.
	from := now
	if from.After(c.until) {
		from = c.until
	}
	return c.verdict, from.Add(c.until.Sub(c.at))
}

// Evidence returns what the case has heard so far.
func (c *Case) Evidence() Evidence {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.evidenceLocked()
}

// evidenceLocked counts what was heard. A suspect served whose attempt has
// not settled yet is not counted. Under d.mu.
func (c *Case) evidenceLocked() Evidence {
	e := Evidence{CheckPassed: c.checkPassed, CheckFailed: c.checkFailed, NamedFailed: len(c.namedFails), Unreachable: c.unreachable}
	for src, since := range c.d.failing {
		if src != c.self && !since.After(c.at) {
			e.Failing++
		}
	}
	for _, h := range c.seen {
		switch {
		case h.suspect && h.served && h.settled:
			e.Recovered++
		case h.suspect && !h.served:
			e.SuspectsFailed++
		case h.suspect:
		case h.served:
			e.Served++
		default:
			e.Failed++
		}
	}
	return e
}

// Close stops gathering evidence for the case. Idempotent.
func (c *Case) Close() {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	delete(d.cases, c)
	c.seen = nil
	d.updateAttention()
}

// Evidence is what a case heard in its window: the records, each by its
// first call there (fresh: not failing when the case's record failed;
// suspects: already failing then), and the checks.
type Evidence struct {
	Served, Failed int // fresh records served, failing
	// Recovered counts suspects served (a record failing with this one got
	// through afterwards); SuspectsFailed suspects failing again.
	Recovered, SuspectsFailed int
	// CheckPassed: a check that started in the window passed (and, as
	// Judge reads it, none failed in the two windows before the failure);
	// CheckFailed: one failed.
	CheckPassed, CheckFailed bool
	// NamedFailed counts the other records failing at the unreported
	// dependency the failure names (judged by the handler's outcomes).
	NamedFailed int
	// Failing counts the other records failing at the dependency since
	// before the failure and failing still, heard or not: a record whose
	// attempt hangs past the window, or waits between attempts, is not
	// heard, but it fails there all the same.
	Failing int
	// Unreachable: the failure could not connect (CauseUnreachable).
	Unreachable bool
}

// Judge is the rule's verdict on a ripe case:
//
//   - a failed check is Shared: a check on the records' path failing says
//     the path is down, whatever else was heard;
//   - a suspect served is Shared: a record failing with this one got
//     through afterwards, so the trouble was shared and has passed (a short
//     outage while the failing records held every credit looks like this);
//   - three or more fresh records served, at least four for each fresh one
//     failing, is Own: the dependency serves records that were not failing,
//     and the suspects failing again are the other bad ones (two or more bad
//     records must not blind each other while others are served);
//   - two or more records failing (fresh or suspects), with fewer than four
//     fresh served for each, is Shared, unless the check passed: then it is
//     NoEvidence, since a path that serves its check while several records
//     fail is several bad records, or an outage the check misses, and only
//     fresh records can tell;
//   - a passed check with at most one other record failing (heard, or
//     failing there still since before) is Own: the path serves, and one
//     other failing record may be a bad one too;
//   - anything else is NoEvidence; and so is Own where another record
//     failed at the unreported dependency the failure names: the records
//     handled say nothing of that dependency, and two records failing there
//     may be two bad ones or an outage of a service only some records need
//     (held and reported, never dead-lettered, until only one fails there);
//     and so is Own for a failure that could not connect: no record's
//     content refuses a connection, so the others being served says the
//     trouble is somewhere only this record went (a service only it needed,
//     one replica of several), not that the record is bad.
func Judge(e Evidence) Verdict {
	failed := e.Failed + e.SuspectsFailed
	var v Verdict
	switch {
	case e.CheckFailed, e.Recovered > 0:
		return Shared
	case e.Served >= 3 && e.Served >= 4*e.Failed:
		v = Own
	case failed >= 2 && e.Served < 4*failed:
		if e.CheckPassed {
			return NoEvidence
		}
		return Shared
	case e.CheckPassed && max(failed, e.Failing) <= 1:
		v = Own
	default:
		return NoEvidence
	}
	if e.NamedFailed > 0 || e.Unreachable {
		return NoEvidence
	}
	return v
}
