package blame

import (
	"slices"
	"time"
)

// Record is the rule's state for one record: its own failures so far, the
// cases of its failures not judged yet, and its wait for a recovery. The
// partition actor keeps one per failing record; the model test drives the
// same methods in virtual time. Not safe for concurrent use (its owner
// serialises it).
//
// A record is retried at its backoff whatever its cases say; a case is
// judged once ripe, at the next Fail or Judge, and the record is
// dead-lettered once its own failures reach the limit (Decide).
type Record struct {
	Self Source
	// Own counts the failures judged the record's own.
	Own int
	// Held is set while the record's latest judged failure had no evidence:
	// it is retried, never dead-lettered, until evidence comes.
	Held bool

	pending    []pendingFailure
	cancelWait func()
	failingAt  []*dep // where the record is marked failing (a suspect in others' cases)
}

type pendingFailure struct {
	attempt int32
	c       *Case
}

// Judged is the verdict on one of a record's failed attempts.
type Judged struct {
	Attempt int32
	Verdict Verdict
}

// Cause is what a failed attempt's error says of why it failed, beyond the
// dependency it names.
type Cause int

const (
	// CauseAny: anything, the record's content among it.
	CauseAny Cause = iota
	// CauseCongestion: it waited for a resource every record shares (a
	// connection of a pool). Congestion at once, never the record's own.
	CauseCongestion
	// CauseUnreachable: a connection could not be made (a refused
	// connection, a failed dial or lookup). No record's content refuses a
	// connection, so it is never the record's own: judged like any failure,
	// an own verdict is no evidence (held), whatever the other records met.
	CauseUnreachable
)

// Fail books failed attempt, which started at started and failed at at,
// made at dependency (as the handler named it; Resolve picks what judges
// it) for cause: the pending cases ripe by then are judged and returned. A
// congested attempt is Congestion at once. While the dependency is in an outage the
// failure is Shared at once (whatever a recovery within its window would
// later say), and the record waits for the recovery: wake is called once,
// from any goroutine, when the recovery releases it (it must only tell the
// record's owner). Otherwise a case is opened, judged once ripe.
//
// The attempt's calls heard in others' cases are settled: those to the
// dependency it failed at did not get it through.
func (r *Record) Fail(b *Book, attempt int32, dependency string, started, at time.Time, cause Cause, wake func()) []Judged {
	judged := r.Judge(at)
	r.stopWaiting()
	if cause == CauseCongestion {
		b.settle(r.Self, started, nil)
		return r.conclude(judged, Judged{attempt, Congestion})
	}
	od := b.dep(b.Resolve(dependency)) // whose outage it is in
	// What judges it: the dependency's calls and checks when they are
	// reported, else the handler's outcomes, with the other failures
	// naming the same dependency (Open).
	jd, named := od, ""
	if !od.known.Load() && !od.outcomes {
		jd, named = b.dep(Handler), dependency
	}
	b.settle(r.Self, started, jd)
	if named != "" {
		b.namedFailure(named, r.Self, at)
	}
	r.markFailing(jd, at)
	if cancel, ok := od.await(at, wake); ok {
		r.cancelWait = cancel
		return r.conclude(judged, Judged{attempt, Shared})
	}
	r.pending = append(r.pending, pendingFailure{attempt: attempt, c: b.open(jd, od, named, cause == CauseUnreachable, r.Self, at)})
	return judged
}

// Judge returns the verdicts of the pending failures ripe at now, in the
// order they failed, and counts them.
func (r *Record) Judge(now time.Time) []Judged {
	var judged []Judged
	kept := r.pending[:0]
	for _, p := range r.pending {
		v := p.c.Verdict(now)
		if v == Pending {
			kept = append(kept, p)
			continue
		}
		p.c.Close()
		judged = r.conclude(judged, Judged{p.attempt, v})
	}
	clear(r.pending[len(kept):])
	r.pending = kept
	return judged
}

// Decide says whether the record's own failures reached limit: it is then
// dead-lettered. Otherwise it is retried at its backoff, whatever its
// pending cases will say: a retry costs a call, while waiting for a verdict
// could cost a good record its chance (one whose failures the outage alone
// saw, and whose verdicts would hear only the records served after it).
func (r *Record) Decide(limit int) (deadLetter bool) { return r.Own >= limit }

// Retry withdraws the record's wait for a recovery: its next attempt
// starts (its backoff ran out first). A waiter left behind would take a
// wake-up from a record still waiting.
func (r *Record) Retry() { r.stopWaiting() }

// MayReach reports whether the verdicts pending could take the record's own
// failures to limit (a failure that could not connect is never own, so its
// verdict cannot), and by when those verdicts are all ripe. Its owner waits
// for them rather than run an attempt more.
func (r *Record) MayReach(limit int) (bool, time.Time) {
	n := r.Own
	var by time.Time
	for _, p := range r.pending {
		if p.c.unreachable {
			continue
		}
		n++
		if u := p.c.Until(); u.After(by) {
			by = u
		}
	}
	return n >= limit, by
}

func (r *Record) conclude(judged []Judged, j Judged) []Judged {
	switch j.Verdict {
	case Own:
		r.Own++
		r.Held = false
	case Shared, Congestion:
		r.Held = false
	case NoEvidence:
		r.Held = true
	}
	return append(judged, j)
}

// Done ends the record's part in the book once its attempt that started at
// started handled it (done, skipped or refused as broken): its calls heard
// in others' cases got it through. Then it closes the record.
func (r *Record) Done(b *Book, started time.Time) {
	b.settle(r.Self, started, nil)
	r.Close()
}

// Close ends the record's part in the book: its pending cases are closed
// unjudged and its wait withdrawn. Call it when the record is dead-lettered
// or abandoned (Done when it was handled).
func (r *Record) Close() {
	for _, p := range r.pending {
		p.c.Close()
	}
	r.pending = nil
	r.stopWaiting()
	for _, d := range r.failingAt {
		d.mu.Lock()
		delete(d.failing, r.Self)
		delete(d.lastServed, r.Self)
		d.updateAttention()
		d.mu.Unlock()
	}
	r.failingAt = nil
}

// markFailing records that the record fails at d from at on, unless it
// already does.
func (r *Record) markFailing(d *dep, at time.Time) {
	if !r.Self.known() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.failing[r.Self]; ok {
		return
	}
	d.failing[r.Self] = at
	d.attention.Store(true)
	if !slices.Contains(r.failingAt, d) {
		r.failingAt = append(r.failingAt, d)
	}
}

func (r *Record) stopWaiting() {
	if r.cancelWait != nil {
		r.cancelWait()
		r.cancelWait = nil
	}
}
