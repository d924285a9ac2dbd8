package actors

import "context"

// credits is a counting semaphore: one credit per record in flight. A
// buffered channel gives select-ability, so waiting for a credit can also
// watch the session context and the partition actor's death.
type credits chan struct{}

func newCredits(n int) credits { return make(credits, n) }

// acquire takes one credit, or gives up when ctx is done or stop closes.
func (c credits) acquire(ctx context.Context, stop <-chan struct{}) bool {
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
	}
}

// release returns n credits. Only credits that were acquired are released.
func (c credits) release(n int) {
	for ; n > 0; n-- {
		<-c
	}
}

// inUse returns the credits held.
func (c credits) inUse() int { return len(c) }

// claimCredits pairs a partition's credits with the process-wide pool. The
// bridge acquires both per record; the partition actor releases both.
type claimCredits struct {
	partition credits
	total     credits
}

func (cc claimCredits) acquire(ctx context.Context, stop <-chan struct{}) bool {
	if !cc.partition.acquire(ctx, stop) {
		return false
	}
	if !cc.total.acquire(ctx, stop) {
		cc.partition.release(1)
		return false
	}
	return true
}

func (cc claimCredits) release(n int) {
	cc.partition.release(n)
	cc.total.release(n)
}
