package blame

import "time"

// Case is the evidence gathered about one failure: what other records' calls
// to its dependency, and its health checks, said in the window after it.
type Case struct {
	d     *dep
	self  Source
	at    time.Time // the failure
	until time.Time // the window's end: calls starting after it are not evidence
	// enough is how many records heard make the case ripe early.
	enough int

	// Under d.mu:
	seen          map[Source]struct{} // records heard, by their first call in the window
	served        int
	failed        int
	checkPassed   bool
	checkFailed   bool
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
	c := &Case{d: d, self: self, at: at, until: at.Add(window), enough: b.cfg.Enough,
		seen: map[Source]struct{}{}, dependencyKey: dependency}
	d.mu.Lock()
	d.cases[c] = struct{}{}
	d.attention.Store(true)
	d.mu.Unlock()
	return c
}

// Dependency returns the dependency the case is about.
func (c *Case) Dependency() string { return c.dependencyKey }

// Until returns the end of the case's window: it is ripe then at the latest.
func (c *Case) Until() time.Time { return c.until }

// heard books src's call that started at start. Under d.mu.
func (c *Case) heard(src Source, start time.Time, served bool) {
	if c.verdict != Pending || src == c.self || start.Before(c.at) || start.After(c.until) {
		return
	}
	if _, ok := c.seen[src]; ok || len(c.seen) >= maxSeen {
		return // a record's first call in the window speaks for it
	}
	c.seen[src] = struct{}{}
	if served {
		c.served++
	} else {
		c.failed++
	}
}

// checked books a health check that started at start. Under d.mu.
func (c *Case) checked(start time.Time, served bool) {
	if c.verdict != Pending || start.Before(c.at) || start.After(c.until) {
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
// dependency in outage.
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
	c.verdict = Judge(c.served, c.failed, c.checkPassed, c.checkFailed)
	if c.verdict == Shared {
		d.enterOutage(c.at)
	}
	return c.verdict
}

// Evidence returns what the case has heard so far.
func (c *Case) Evidence() (served, failed int, checkPassed, checkFailed bool) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.served, c.failed, c.checkPassed, c.checkFailed
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
// other records heard in its window (each by its first call there); the
// checks, whether one that started in it passed or failed.
//
//   - a failed check is Shared: a check on the records' path failing says
//     the path is down, whatever else was heard;
//   - two or more records failing, with fewer than four served for each, is
//     Shared: the trouble is not the record's alone;
//   - three or more served, at least four for each failure, is Own;
//   - a passed check with at most one other record failing is Own: the
//     path serves, and one other failing record may be a bad one too (two
//     bad records blocking their partitions must not blind each other);
//   - anything else is NoEvidence.
func Judge(served, failed int, checkPassed, checkFailed bool) Verdict {
	switch {
	case checkFailed:
		return Shared
	case failed >= 2 && served < 4*failed:
		return Shared
	case served >= 3 && served >= 4*failed:
		return Own
	case checkPassed && failed <= 1:
		return Own
	}
	return NoEvidence
}
