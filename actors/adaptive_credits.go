package actors

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// adaptiveCredits is the process pool when the in-flight limit is adaptive:
// a counting semaphore whose size the concurrency actor moves between the
// floor and the ceiling (G). Waiters are served in arrival order, as the
// fixed pool's channel serves them, so no partition starves while others
// take every credit that comes back.
//
// Lowering the limit takes nothing back: records already admitted keep
// their credits, and no credit is granted until fewer than the new limit
// are held. Every credit acquired comes back exactly once through release;
// a waiter that gives up at the moment it is granted a credit returns it.
type adaptiveCredits struct {
	mu      sync.Mutex
	held    int
	max     int
	waiters []*creditWaiter
}

type creditWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool
}

func newAdaptiveCredits(initial int) *adaptiveCredits {
	return &adaptiveCredits{max: initial}
}

func (p *adaptiveCredits) tryAcquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) == 0 && p.held < p.max {
		p.held++
		return true
	}
	return false
}

// acquire takes one credit, or gives up when ctx is done or any of stops
// closes (a nil channel never does).
func (p *adaptiveCredits) acquire(ctx context.Context, stop, ended <-chan struct{}) bool {
	p.mu.Lock()
	if len(p.waiters) == 0 && p.held < p.max {
		p.held++
		p.mu.Unlock()
		return true
	}
	w := &creditWaiter{ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	case <-stop:
	case <-ended:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		// Granted as it gave up: the credit goes back to the next waiter.
		p.held--
		p.grant()
		return false
	}
	p.waiters = slices.DeleteFunc(p.waiters, func(o *creditWaiter) bool { return o == w })
	return false
}

// release returns n credits. Returning more than are held is an accounting
// bug, reported as an error; nothing is given back then.
func (p *adaptiveCredits) release(n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > p.held {
		return fmt.Errorf("credit over-release: %d returned, only %d were held", n, p.held)
	}
	p.held -= n
	p.grant()
	return nil
}

// setLimit moves the limit; raising it grants waiters at once.
func (p *adaptiveCredits) setLimit(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.max = n
	p.grant()
}

// grant hands free credits to the waiters in arrival order. p.mu is held.
func (p *adaptiveCredits) grant() {
	for p.held < p.max && len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
		w.granted = true
		p.held++
		close(w.ready)
	}
}

func (p *adaptiveCredits) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *adaptiveCredits) limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// queued returns how many acquirers are waiting.
func (p *adaptiveCredits) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}
