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
	seen        map[Source]struct{} // records heard, by their first call in the window
	served      int                 // fresh records served
	failed      int                 // fresh records failing
	recovered   int                 // suspects served: records failing when this one failed
	checkPassed bool
	checkFailed bool
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
	if since, ok := c.d.failing[src]; ok && !since.After(c.at) {
		if served {
			c.recovered++
		}
		return // a suspect's failure says nothing either way
	}
	if served {
		c.served++
	} else {
		c.failed++
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
		c.checkPassed = true
	} else {
		c.checkFailed = true
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
	if c.served+c.failed < c.enough && now.Before(c.until) {
		return Pending
	}
	// The check speaks for the path only if it has been passing: none failed
	// in the two windows before the failure either (one lucky pass of a
	// dependency shedding half its calls is no evidence).
	steady := c.checkPassed && c.steadyBefore
	c.verdict = Judge(c.served, c.failed, c.recovered, steady, c.checkFailed)
	if c.verdict == Shared {
		// The outage lasts a window past the verdict: a failure made in a
		// short lull of a trouble that keeps coming is shared too.
		d.enterOutage(c.at, now.Add(c.until.Sub(c.at)))
	}
	return c.verdict
}

// Evidence returns what the case has heard so far: fresh records served
// and failing, suspects served, and the checks.
func (c *Case) Evidence() (served, failed, recovered int, checkPassed, checkFailed bool) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.served, c.failed, c.recovered, c.checkPassed, c.checkFailed
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

// Judge is the rule's verdict on a ripe case: served and failed are the
// fresh records heard in its window (each by its first call there: records
// not failing when this one failed), recovered the suspects served (records
// that were failing too, and then were served); the checks, whether one
// that started in it passed (and none failed in the two windows before:
// the caller's to say) or failed.
//
//   - a failed check is Shared: a check on the records' path failing says
//     the path is down, whatever else was heard;
//   - a suspect served is Shared: a record failing with this one got
//     through afterwards, so the trouble was shared and has passed (a short
//     outage while the failing records held every credit looks like this);
//   - two or more records failing, with fewer than four served for each, is
//     Shared, unless the check passed: then it is NoEvidence, since a path
//     that serves its check while several records fail is several bad
//     records or a partial outage the check misses, and only more records
//     can tell;
//   - three or more served, at least four for each failure, is Own;
//   - a passed check with at most one other record failing is Own: the
//     path serves, and one other failing record may be a bad one too;
//   - anything else is NoEvidence.
func Judge(served, failed, recovered int, checkPassed, checkFailed bool) Verdict {
	switch {
	case checkFailed, recovered > 0:
		return Shared
	case failed >= 2 && served < 4*failed:
		if checkPassed {
			return NoEvidence
		}
		return Shared
	case served >= 3 && served >= 4*failed:
		return Own
	case checkPassed && failed <= 1:
		return Own
	}
	return NoEvidence
}
