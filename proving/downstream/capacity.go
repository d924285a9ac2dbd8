// Package downstream models a dependency with a capacity, for the
// pipeline's tests and benchmarks: the simulated handler and the platform
// mock serve at most K calls at once and queue the rest, first come first
// served, so that a call's latency climbs once the callers' concurrency
// passes K, as it does in front of a real service with a bounded number of
// workers or connections. It is not production code.
package downstream

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// Capacity is a FIFO counting gate: at most Limit calls hold a slot at
// once; the others wait in Acquire, in arrival order. A limit of 0 admits
// every call without waiting. A nil *Capacity admits every call without
// waiting and counts nothing. Safe for concurrent use.
type Capacity struct {
	mu      sync.Mutex
	limit   int
	serving int
	waiters list.List // of *waiter, oldest first
}

type waiter struct {
	granted chan struct{} // closed when the waiter is given its slot
	// done is set, under the gate's lock, when the waiter is given its
	// slot: a waiter whose context ends tells by it whether it holds one.
	done bool
}

// NewCapacity returns a gate serving at most k calls at once (0: any
// number). It panics if k is negative.
func NewCapacity(k int) *Capacity {
	checkLimit(k)
	return &Capacity{limit: k}
}

func checkLimit(k int) {
	if k < 0 {
		panic(fmt.Sprintf("downstream: negative capacity %d", k))
	}
}

// Acquire takes a slot, waiting behind the calls that came first while
// Limit calls are being served. If ctx ends before a slot is given, it
// returns ctx.Err() and holds none: a slot given at the same moment is given
// back (to the next waiter). A slot that is free at once is taken whether or
// not ctx has ended. Each nil return must be matched by one Release.
func (c *Capacity) Acquire(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	if c.limit == 0 || (c.serving < c.limit && c.waiters.Len() == 0) {
		c.serving++
		c.mu.Unlock()
		return nil
	}
	w := &waiter{granted: make(chan struct{})}
	e := c.waiters.PushBack(w)
	c.mu.Unlock()

	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	c.mu.Lock()
	if w.done {
		// Given a slot as the context ended: hand it on.
		c.serving--
		c.grant()
	} else {
		c.waiters.Remove(e)
	}
	c.mu.Unlock()
	return ctx.Err()
}

// Release gives back a slot taken by Acquire, granting it to the oldest
// waiter if the limit allows. It panics if no slot is held.
func (c *Capacity) Release() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serving == 0 {
		panic("downstream: Release without Acquire")
	}
	c.serving--
	c.grant()
}

// SetLimit changes the limit to k (0: any number). Raising it grants
// waiters at once, oldest first; lowering it lets the calls being served
// finish, and grants none until fewer than k are being served. It panics if
// k is negative.
func (c *Capacity) SetLimit(k int) {
	checkLimit(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = k
	c.grant()
}

// grant gives free slots to the oldest waiters. c.mu is held.
func (c *Capacity) grant() {
	for c.waiters.Len() > 0 && (c.limit == 0 || c.serving < c.limit) {
		w := c.waiters.Remove(c.waiters.Front()).(*waiter)
		w.done = true
		c.serving++
		close(w.granted)
	}
}

// Limit is the current limit (0: none).
func (c *Capacity) Limit() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit
}

// Serving is the number of slots held: calls being served.
func (c *Capacity) Serving() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serving
}

// Queued is the number of calls waiting in Acquire for a slot.
func (c *Capacity) Queued() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiters.Len()
}
