package persistence

import (
	"container/list"
	"context"
	"sync"

	"github.com/patchflow/patchflow/messages"
)

// admission hands out the pool's connections, one per transaction or read,
// the urgent first: work whose context is urgent (messages.Urgency, the
// record holding its partition's committed offset) is served before every
// waiter that is not, and waiters of one kind in the order they came. It
// holds as many places as the pool has connections, so database/sql never
// queues behind it and its order is the order connections are given.
//
// Cost: a wait is a list element and a channel; choosing the next waiter
// scans the waiters (at most the records in flight) asking each its Urgent,
// an atomic load.
type admission struct {
	mu      sync.Mutex
	free    int
	waiters list.List // of *admissionWaiter, in arrival order
}

type admissionWaiter struct {
	urgency messages.Urgency // nil: never urgent
	ready   chan struct{}    // closed when granted
	granted bool
}

func newAdmission(places int) *admission { return &admission{free: max(places, 1)} }

// acquire takes a place, waiting until one is free or ctx is done. The
// error is ctx's: congestion, not the caller's failure (see poolWait).
func (a *admission) acquire(ctx context.Context) error {
	a.mu.Lock()
	if a.free > 0 {
		a.free--
		a.mu.Unlock()
		return nil
	}
	w := &admissionWaiter{urgency: messages.UrgencyOf(ctx), ready: make(chan struct{})}
	e := a.waiters.PushBack(w)
	a.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		granted := w.granted
		if !granted {
			a.waiters.Remove(e)
		}
		a.mu.Unlock()
		if granted {
			a.release() // granted as the context ended: pass the place on
		}
		return ctx.Err()
	}
}

// release gives a place back: to the first urgent waiter, else the oldest.
func (a *admission) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := a.waiters.Front()
	for e := next; e != nil; e = e.Next() {
		if u := e.Value.(*admissionWaiter).urgency; u != nil && u.Urgent() {
			next = e
			break
		}
	}
	if next == nil {
		a.free++
		return
	}
	w := a.waiters.Remove(next).(*admissionWaiter)
	w.granted = true
	close(w.ready)
}
