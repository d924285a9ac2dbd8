package persistence

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
)

type urgencyFlag struct{ atomic.Bool }

func (u *urgencyFlag) Urgent() bool { return u.Load() }

// waitQueued waits until n callers wait in a.
func waitQueued(t *testing.T, a *admission, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.mu.Lock()
		got := a.waiters.Len()
		a.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The urgent waiter is served first, even when it came last or became
// urgent while waiting; the others in the order they came.
func TestAdmissionServesTheUrgentFirst(t *testing.T) {
	a := newAdmission(1)
	if err := a.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	served := make(chan int, 8)
	flags := make([]*urgencyFlag, 5)
	var wg sync.WaitGroup
	for i := range flags {
		flags[i] = &urgencyFlag{}
		ctx := messages.WithUrgency(context.Background(), flags[i])
		wg.Go(func() {
			if err := a.acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			served <- i
		})
		waitQueued(t, a, i+1) // arrival order 0, 1, 2, 3, 4
	}
	flags[4].Store(true) // came last, urgent from the start
	flags[2].Store(true) // became urgent while waiting; earlier in line than 4
	want := []int{2, 4, 0, 1, 3}
	for _, w := range want {
		a.release()
		select {
		case got := <-served:
			if got != w {
				t.Fatalf("served %d, want %d (order %v)", got, w, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter served, want %d", w)
		}
	}
	wg.Wait()
	a.release()
	if a.free != 1 || a.waiters.Len() != 0 {
		t.Fatalf("%d free, %d waiting at the end; want 1, 0", a.free, a.waiters.Len())
	}
}

// A waiter whose context ends leaves the line; no place is lost, also when
// the place comes as the context ends.
func TestAdmissionLosesNoPlace(t *testing.T) {
	const places, workers = 3, 40
	a := newAdmission(places)
	var wg sync.WaitGroup
	var inside, peak atomic.Int64
	for i := range workers {
		wg.Go(func() {
			for j := range 200 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i+j)%3)*50*time.Microsecond)
				if a.acquire(ctx) == nil {
					n := inside.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					inside.Add(-1)
					a.release()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > places {
		t.Fatalf("%d holders at once with %d places", p, places)
	}
	if a.free != places || a.waiters.Len() != 0 {
		t.Fatalf("%d free, %d waiting after every caller left; want %d, 0", a.free, a.waiters.Len(), places)
	}
}
