package actors

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
)

// credits is a counting semaphore: one credit per record in flight. A
// buffered channel gives select-ability, so waiting for a credit can also
// watch the session, the claim and the partition actor's death.
type credits chan struct{}

func newCredits(n int) credits { return make(credits, n) }

// acquire takes one credit, or gives up when ctx is done or any of stops
// closes (a nil channel never does).
func (c credits) acquire(ctx context.Context, stop, ended <-chan struct{}) bool {
	select {
	case c <- struct{}{}:
		return true
	default:
	}
	select {
	case c <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-ended:
		return false
	}
}

// release returns n credits. It never blocks: returning more than are held
// is an accounting bug, reported as an error instead of a goroutine stuck
// forever on the channel.
func (c credits) release(n int) error {
	for i := 0; i < n; i++ {
		select {
		case <-c:
		default:
			return fmt.Errorf("credit over-release: %d returned, only %d were held", n, i)
		}
	}
	return nil
}

// tryAcquire takes one credit if one is free now, without waiting.
func (c credits) tryAcquire() bool {
	select {
	case c <- struct{}{}:
		return true
	default:
		return false
	}
}

// inUse returns the credits held.
func (c credits) inUse() int { return len(c) }

// limit returns how many credits there are.
func (c credits) limit() int { return cap(c) }

// processPool is the process-wide credit pool (G): fixed credits, or an
// adaptiveCredits whose limit the concurrency actor moves.
type processPool interface {
	acquire(ctx context.Context, stop, ended <-chan struct{}) bool
	tryAcquire() bool
	release(n int) error
	inUse() int
	limit() int
}

// claimCredits pairs a claim's partition credits (S) with the process-wide
// pool (G). The bridge acquires one of each per record; the claim's worker
// gives them back through release as records finish or are abandoned; when
// the claim ends, close gives back whatever the worker did not (records lost
// in a dead actor's mailbox, or admitted after it stopped).
//
// Guarantee: every credit acquired comes back to the pool exactly once.
// release after close is a no-op, since close already returned everything
// still held, and acquiring after close fails; an over-release returns an
// error and gives back nothing more. The book is one atomic counter; the
// fixed pool is a channel, the adaptive one a mutex-guarded count.
type claimCredits struct {
	partition credits
	total     processPool
	// held counts the credit pairs acquired and not given back; closedBook
	// once the claim has ended.
	held atomic.Int64
}

// closedBook marks a closed claimCredits.
const closedBook = math.MinInt64

func newClaimCredits(perPartition int, total processPool) *claimCredits {
	return &claimCredits{partition: newCredits(perPartition), total: total}
}

// acquire takes a partition credit and a process credit, or neither.
func (cc *claimCredits) acquire(ctx context.Context, stop, ended <-chan struct{}) bool {
	if !cc.partition.acquire(ctx, stop, ended) {
		return false
	}
	if !cc.total.acquire(ctx, stop, ended) {
		_ = cc.partition.release(1) // just acquired: cannot over-release
		return false
	}
	return cc.book()
}

// tryAcquire takes a partition credit and a process credit if both are free
// now, without waiting.
func (cc *claimCredits) tryAcquire() bool {
	if !cc.partition.tryAcquire() {
		return false
	}
	if !cc.total.tryAcquire() {
		_ = cc.partition.release(1) // just acquired: cannot over-release
		return false
	}
	return cc.book()
}

// book enters a pair of credits just taken, unless the claim has closed:
// then they go straight back and the acquire fails.
func (cc *claimCredits) book() bool {
	for {
		h := cc.held.Load()
		if h == closedBook {
			_ = cc.giveBack(1) // just acquired: cannot over-release
			return false
		}
		if cc.held.CompareAndSwap(h, h+1) {
			return true
		}
	}
}

// release gives back n records' credits.
func (cc *claimCredits) release(n int) error {
	if n <= 0 {
		return nil
	}
	for {
		h := cc.held.Load()
		if h == closedBook {
			return nil // close returned them already
		}
		if int64(n) > h {
			return fmt.Errorf("credit over-release: %d returned, the claim holds %d", n, h)
		}
		if cc.held.CompareAndSwap(h, h-int64(n)) {
			return cc.giveBack(n)
		}
	}
}

// close gives back every credit still held and makes later releases no-ops.
// It returns how many it gave back.
func (cc *claimCredits) close() (int, error) {
	h := cc.held.Swap(closedBook)
	if h == closedBook {
		return 0, nil
	}
	return int(h), cc.giveBack(int(h))
}

func (cc *claimCredits) giveBack(n int) error {
	if err := cc.partition.release(n); err != nil {
		return err
	}
	return cc.total.release(n)
}

// heldNow returns the credits the claim holds (none once closed).
func (cc *claimCredits) heldNow() int {
	if h := cc.held.Load(); h != closedBook {
		return int(h)
	}
	return 0
}
