package blame

import "time"

// Case is the evidence gathered about one failure: what other records' calls
// to its dependency, and its health checks, said in the window after it.
type Case struct {
	d     *dep
	self  Source
	at    time.Time // the failure
	until time.Time // the window's end: checks starting after it are not evidence
	heard time.Time // the end of the first third of the window: records' calls starting after it are not evidence
	// enough is how many records heard make the case ripe early.
	enough int

	// Under d.mu:
	seen     map[Source]struct{} // records heard, by their first call in the window
	evidence Evidence
	// steadyBefore: no check failed in the two windows before the failure.
	steadyBefore  bool
	verdict       Verdict // final once not Pending
	closed        bool
	dependencyKey string
}

// Open starts gathering evidence about a failure of self at dependency (as
// Resolve names it) at at. Close it once it is judged or its record ends.
func (b *Book) Open(dependency string, self Source, at time.Time) *Case {
	d := b.dep(dependency)
	window := b.cfg.Window
	if mean := time.Duration(d.meanCall.Load()); 2*mean > window {
		// Calls that start within the window end after it: wait for them.
		window = 2 * mean
	}
	c := &Case{d: d, self: self, at: at, until: at.Add(window), heard: at.Add(window / 3), enough: b.cfg.Enough,
		seen: map[Source]struct{}{}, dependencyKey: dependency}
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
	c.seen[src] = struct{}{}
	e := &c.evidence
	if since, ok := c.d.failing[src]; ok && !since.After(c.at) {
		if served {
			e.Recovered++
		} else {
			e.SuspectsFailed++
		}
		return
	}
	if served {
		e.Served++
	} else {
		e.Failed++
	}
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
		c.evidence.CheckPassed = true
	} else {
		c.evidence.CheckFailed = true
	}
}

// Verdict judges the case at now: Pending until it is ripe (enough records
// heard, or its window closed), then final. A Shared verdict puts the
// dependency in outage for a window.
func (c *Case) Verdict(now time.Time) Verdict {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.verdict != Pending {
		return c.verdict
	}
	if len(c.seen) < c.enough && now.Before(c.until) {
		return Pending
	}
	// The check speaks for the path only if it has been passing: none failed
	// in the two windows before the failure either (one lucky pass of a
	// dependency shedding half its calls is no evidence).
	e := c.evidence
	e.CheckPassed = e.CheckPassed && c.steadyBefore
	c.verdict = Judge(e)
	if c.verdict == Shared {
		// The outage lasts a window past the verdict: a failure made in a
		// short lull of a trouble that keeps coming is shared too.
		d.enterOutage(c.at, now.Add(c.until.Sub(c.at)))
	}
	return c.verdict
}

// Evidence returns what the case has heard so far.
func (c *Case) Evidence() Evidence {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.evidence
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
//   - a passed check with at most one other record failing is Own: the
//     path serves, and one other failing record may be a bad one too;
//   - anything else is NoEvidence.
func Judge(e Evidence) Verdict {
	failed := e.Failed + e.SuspectsFailed
	switch {
	case e.CheckFailed, e.Recovered > 0:
		return Shared
	case e.Served >= 3 && e.Served >= 4*e.Failed:
		return Own
	case failed >= 2 && e.Served < 4*failed:
		if e.CheckPassed {
			return NoEvidence
		}
		return Shared
	case e.CheckPassed && failed <= 1:
		return Own
	}
	return NoEvidence
}
