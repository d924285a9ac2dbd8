package actors

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/messages"
)

// What a partition actor watches in its records, and says loudly: an
// attempt whose handler has not returned past its deadline (it ignores its
// context), and a record held because none of its failures could be judged
// (no evidence). Both are logged at warn level (the first time, then at most
// once per heldLogEvery for a held record), counted in the partition's state
// (PartitionState.Overdue, Held: metrics, /status) and, through the pinned
// record's age, in /readyz.

// sweep is the actor's timer: look at the records once more.
type sweep struct{}

const (
	// sweepEvery is how often the actor looks for overdue and held records.
	sweepEvery = time.Second
	// heldLogEvery is how often a record still held is logged again.
	heldLogEvery = time.Minute
)

// overdueGrace is how long past its deadline an attempt may run before it
// is reported: a tenth of the attempt timeout, between 1 and 30 seconds.
func overdueGrace(timeout time.Duration) time.Duration {
	return min(max(timeout/10, time.Second), 30*time.Second)
}

func (a *PartitionActor) scheduleSweep() {
	self, root := a.self, a.system.Root
	a.sweepTimer = time.AfterFunc(sweepEvery, func() { root.Send(self, sweep{}) })
}

func (a *PartitionActor) stopSweep() {
	if a.sweepTimer != nil {
		a.sweepTimer.Stop()
	}
}

func (a *PartitionActor) sweep(actor.Context) {
	if a.drained || a.stopping {
		return
	}
	defer a.scheduleSweep()
	now := time.Now()
	overdue := 0
	timeout := a.cfg.Settings.AttemptTimeout
	for _, st := range a.records {
		if timeout > 0 && st.child != nil && st.letter == nil && now.Sub(st.started) > timeout+overdueGrace(timeout) {
			overdue++
			if st.overdue != st.attempt {
				st.overdue = st.attempt
				a.logger.Warn("attempt overdue: the handler has not returned past its deadline (it does not honour its context); the record pins its partition until it returns",
					"offset", st.record.GetOffset(), "key", safeKey(st.record.GetKey()), "attempt", st.attempt,
					"running_for", now.Sub(st.started).Round(time.Second).String(), "deadline", timeout.String())
			}
		}
		if !st.heldSince.IsZero() && now.Sub(st.heldLogged) >= heldLogEvery {
			a.logHeld(st, now)
		}
	}
	a.gauges.overdue.Store(int64(overdue))
}

// hold records whether st is held (its latest failure could not be judged):
// the partition's count, and a warning as it becomes held.
func (a *PartitionActor) hold(st *recordState, held bool, now time.Time) {
	switch {
	case held && st.heldSince.IsZero():
		st.heldSince = now
		a.gauges.held.Add(1)
		a.logHeld(st, now)
	case !held && !st.heldSince.IsZero():
		st.heldSince = time.Time{}
		a.gauges.held.Add(-1)
	}
}

func (a *PartitionActor) logHeld(st *recordState, now time.Time) {
	st.heldLogged = now
	last := st.failures.lastAttempt()
	a.logger.Warn("record held: its failures cannot be judged its own or shared (no other record called the dependency, and no health check of it ran, just after them); it is retried until evidence comes, never dead-lettered on a guess; an operator may release it to the dead-letter topic (docs/consumer.md, \"Held records\")",
		"offset", st.record.GetOffset(), "key", safeKey(st.record.GetKey()), "dependency", last.GetDependency(),
		"attempts", st.attempt, "held_for", now.Sub(st.heldSince).Round(time.Second).String(), "error", last.GetError())
}

// ReleaseRecord asks a partition actor to give up on one of its records:
// one that has failed (held, or retried through an outage) is dead-lettered
// at once when it waits for its retry, else when its running attempt fails
// (it finishes as usual if that attempt succeeds). An operator's action:
// the bridge's ReleaseRecord sends it.
type ReleaseRecord struct {
	Offset int64
}

// ReleaseResult answers a ReleaseRecord.
type ReleaseResult struct {
	// Released is true when the record will be dead-lettered.
	Released bool
	// Status says what happened, for the operator.
	Status string
}

func (a *PartitionActor) releaseRecord(c actor.Context, m *ReleaseRecord) *ReleaseResult {
	st := a.records[m.Offset]
	switch {
	case a.isDraining() || a.stopping:
		return &ReleaseResult{Status: "the partition is being handed over; ask its next owner"}
	case st == nil:
		return &ReleaseResult{Status: "not in flight here (finished, not yet admitted, or in another process)"}
	case st.letter != nil:
		return &ReleaseResult{Status: "already being dead-lettered"}
	case st.releaseAsked:
		return &ReleaseResult{Released: true, Status: "already released: dead-lettered when its running attempt fails"}
	case st.failures == nil:
		return &ReleaseResult{Status: "it has not failed: nothing to release"}
	}
	st.releaseAsked = true
	a.counts.release()
	a.logger.Warn("record released by an operator: dead-lettered instead of retried", "offset", m.Offset,
		"key", safeKey(st.record.GetKey()), "attempts", st.attempt, "held", !st.heldSince.IsZero())
	if st.child == nil {
		st.close()
		a.hold(st, false, time.Time{})
		a.startDeadLetter(c, st, messages.ReasonReleased)
		return &ReleaseResult{Released: true, Status: "dead-lettering now"}
	}
	return &ReleaseResult{Released: true, Status: "its attempt is running: dead-lettered if it fails"}
}

// safeKey is a record key as logs show it: valid UTF-8 with control
// characters escaped, at most 128 bytes of it (a key is the producer's to
// choose).
func safeKey(key []byte) string {
	const most = 128
	k := key
	cut := len(k) > most
	if cut {
		k = k[:most]
	}
	var b strings.Builder
	for len(k) > 0 {
		r, n := utf8.DecodeRune(k)
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(k[0]), 16))
		case r < 0x20 || (r >= 0x7f && r < 0xa0):
			b.WriteString(strconv.QuoteRuneToASCII(r)[1 : len(strconv.QuoteRuneToASCII(r))-1])
		default:
			b.WriteRune(r)
		}
		k = k[n:]
	}
	if cut {
		b.WriteString("…")
	}
	return b.String()
}
