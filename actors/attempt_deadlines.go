package actors

import (
	"context"
	"sync/atomic"
	"time"
)

// attemptDeadlines gives each handler attempt a context whose deadline is at
// least the attempt timeout after the attempt starts and at most a tick
// more. Attempts starting within the same tick share one context, so an
// attempt costs no timer and no registration in the parent context of its
// own (a context.WithTimeout per record was about a tenth of the
// pipeline's CPU when handlers cost nothing). Each shared context cancels
// itself at its deadline, or with the parent. Safe for concurrent use.
type attemptDeadlines struct {
	parent  context.Context
	timeout time.Duration
	tick    time.Duration
	current atomic.Pointer[deadlineBucket]
}

type deadlineBucket struct {
	ctx    context.Context
	cancel context.CancelFunc // called only when the bucket is not used; the deadline cancels the rest
	until  int64              // unix nanoseconds: attempts starting from then need a new bucket
}

// newAttemptDeadlines returns the deadlines for timeout under parent; with
// timeout 0 every attempt gets parent itself (no deadline). The tick is a
// tenth of the timeout, at most 100 ms.
func newAttemptDeadlines(parent context.Context, timeout time.Duration) *attemptDeadlines {
	return &attemptDeadlines{parent: parent, timeout: timeout, tick: min(timeout/10, 100*time.Millisecond)}
}

// context returns the context of an attempt starting at now.
func (d *attemptDeadlines) context(now time.Time) context.Context {
	if d.timeout <= 0 || d.tick <= 0 {
		return d.parent
	}
	for {
		b := d.current.Load()
		if b != nil && now.UnixNano() < b.until {
			return b.ctx
		}
		start := now.Truncate(d.tick)
		ctx, cancel := context.WithDeadline(d.parent, start.Add(d.tick+d.timeout))
		next := &deadlineBucket{ctx: ctx, cancel: cancel, until: start.Add(d.tick).UnixNano()}
		if d.current.CompareAndSwap(b, next) {
			return ctx
		}
		cancel() // another attempt installed a bucket first: use that one
	}
}
