package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/messages"
)

// Drain timer messages, sent by the PartitionActor to itself. The drain
// budget splits in two: handlers run until the cancel point, then get the
// rest (the cancel grace) to return from their cancellation, so a cancelled
// handler is normally gone before the next owner of the partition starts the
// same key.
type (
	drainCancel   struct{}
	drainDeadline struct{}
)

// cancelGrace is the part of a drain budget reserved for cancelled handlers
// to return: a tenth, at most two seconds.
func cancelGrace(budget time.Duration) time.Duration {
	return min(budget/10, 2*time.Second)
}

func (a *PartitionActor) startDrain(c actor.Context, m *messages.Drain) {
	if a.isDraining() {
		return
	}
	close(a.draining)
	a.drainReply = c.Sender()
	held := a.gate.Held()
	a.gate.Clear() // held records never start; they stay unfinished
	timeout := m.GetTimeout().AsDuration()
	if timeout <= 0 {
		timeout = a.cfg.Settings.DrainTimeout
	}
	a.logger.Debug("draining", "running", a.running, "held", held, "timeout", timeout)
	if a.running == 0 {
		a.completeDrain(c, false)
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	a.drainTimers = []*time.Timer{
		time.AfterFunc(timeout-cancelGrace(timeout), func() { root.Send(self, drainCancel{}) }),
		time.AfterFunc(timeout, func() { root.Send(self, drainDeadline{}) }),
	}
}

func (a *PartitionActor) maybeCompleteDrain(c actor.Context) {
	if a.running == 0 && !a.drained {
		a.completeDrain(c, a.cancelled)
	}
}

// completeDrain cancels what still runs, marks the final watermark, answers
// the requester and stops. Cancelled and held records are abandoned: their
// offsets are never marked, so Kafka redelivers them.
func (a *PartitionActor) completeDrain(c actor.Context, timedOut bool) {
	a.drained = true
	for _, t := range a.drainTimers {
		t.Stop()
	}
	a.cancelRun()
	a.commit()
	abandoned := a.releaseUnfinished()
	result := &messages.DrainResult{Watermark: a.marked, Finished: a.drainFinish, Abandoned: int64(abandoned), TimedOut: timedOut}
	switch {
	case timedOut && abandoned > 0:
		attrs := []any{"abandoned", abandoned, "finished", a.drainFinish}
		if a.marked >= 0 {
			attrs = append(attrs, "watermark", a.marked)
		}
		a.logger.Warn("drain timed out: records abandoned unfinished (not committed; Kafka redelivers them to the partition's next owner)", attrs...)
	case a.marked >= 0:
		a.logger.Debug("partition drained", "watermark", a.marked, "finished", a.drainFinish, "abandoned", abandoned, "timed_out", timedOut)
	default:
		a.logger.Debug("partition drained; nothing marked", "finished", a.drainFinish, "abandoned", abandoned, "timed_out", timedOut)
	}
	if a.drainReply != nil {
		c.Send(a.drainReply, result)
	}
	c.Stop(c.Self())
}

// releaseUnfinished gives back the credit and bytes of every record still
// held: one per entry of records, the actor's own book of what it holds
// credits for. The bytes of a record whose child still runs (a handler
// that has not returned from the drain's cancellation) stay held until the
// actor has stopped, which protoactor does only once every child has: what
// the handler holds is alive until then.
func (a *PartitionActor) releaseUnfinished() int {
	n := len(a.records)
	var bytes int64
	for _, st := range a.records {
		st.close()
		a.hold(st, false, time.Time{})
		a.lendBytes(st, false)
		if st.child != nil {
			a.lingering += st.bytes
		} else {
			bytes += st.bytes
		}
	}
	clear(a.lendingKeys)
	a.gauges.inFlight.Store(0)
	a.cfg.Release(n, bytes)
	a.counts.abandon(int64(n))
	a.stats.inFlight.Add(int64(-n))
	clear(a.records)
	return n
}
