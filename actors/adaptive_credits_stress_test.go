package actors

// A concurrent stress of the adaptive pool under claims that
// acquire, give up (context, stop, end), release, and close while the limit
// moves.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAdaptivePoolUnderConcurrentClaims(t *testing.T) {
	for round := range 20 {
		const ceiling = 6
		pool := newAdaptiveCredits(3)
		var maxSeen atomic.Int64 // the largest limit ever set
		maxSeen.Store(3)
		stopLimits := make(chan struct{})
		var limits sync.WaitGroup
		limits.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), 1))
			for {
				select {
				case <-stopLimits:
					return
				default:
				}
				n := 1 + rng.IntN(ceiling)
				if int64(n) > maxSeen.Load() {
					maxSeen.Store(int64(n))
				}
				pool.setLimit(n)
				if h := pool.inUse(); int64(h) > maxSeen.Load() {
					t.Errorf("held %d above every limit ever set (%d)", h, maxSeen.Load())
				}
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
		})
		var claims sync.WaitGroup
		for c := range 8 {
			claims.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(c)+2))
				cc := newClaimCredits(1+rng.IntN(3), pool)
				stop, ended := make(chan struct{}), make(chan struct{})
				var closers sync.WaitGroup
				after, byStop := time.Duration(5+rng.IntN(20))*time.Millisecond, rng.IntN(2) == 0
				closers.Go(func() {
					time.Sleep(after)
					if _, err := cc.close(); err != nil { // racing the claim's acquires and releases
						t.Errorf("close: %v", err)
					}
					if byStop {
						close(stop)
					} else {
						close(ended)
					}
				})
				var held []int
				for range 200 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(300))*time.Microsecond)
					ok := cc.tryAcquire() || cc.acquire(ctx, stop, ended)
					cancel()
					if ok {
						held = append(held, 1)
					}
					if len(held) > 0 && rng.IntN(2) == 0 {
						if err := cc.release(1); err != nil && cc.held.Load() != closedBook {
							t.Errorf("release: %v", err)
						}
						held = held[1:]
					}
				}
				closers.Wait()
				if _, err := cc.close(); err != nil {
					t.Errorf("close: %v", err)
				}
				if err := cc.release(len(held)); err != nil { // after close: a no-op
					t.Errorf("release after close: %v", err)
				}
			})
		}
		claims.Wait()
		close(stopLimits)
		limits.Wait()
		if pool.inUse() != 0 || pool.queued() != 0 {
			t.Fatalf("round %d: every claim closed, the pool holds %d and has %d waiters", round, pool.inUse(), pool.queued())
		}
	}
}
