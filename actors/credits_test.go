package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Every credit taken comes back to the pool exactly once, whatever order
// claims take, give back, over-give and close in: after every step the pool
// holds exactly what the open claims hold, and once every claim is closed it
// holds nothing. An over-release is an error that changes nothing; a release
// after close is a no-op.
//
// The same holds of the adaptive pool while its limit moves, and it grants
// no credit while the limit is held.
func TestClaimCreditsComeBackExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := rapid.IntRange(1, 8).Draw(t, "G")
		s := rapid.IntRange(1, 4).Draw(t, "S")
		var pool processPool = newCredits(g)
		adaptive, _ := pool.(*adaptiveCredits)
		if rapid.Bool().Draw(t, "adaptive") {
			adaptive = newAdaptiveCredits(rapid.IntRange(1, g).Draw(t, "limit"))
			pool = adaptive
		}
		claims := make([]*claimCredits, rapid.IntRange(1, 4).Draw(t, "claims"))
		for i := range claims {
			claims[i] = newClaimCredits(s, pool)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // acquire never waits: a full pool answers false at once
		check := func() {
			held := 0
			for _, c := range claims {
				h := c.heldNow()
				if h != c.partition.inUse() || h > s {
					t.Fatalf("claim holds %d, its partition credits say %d (S=%d)", h, c.partition.inUse(), s)
				}
				held += h
			}
			if pool.inUse() != held || held > g {
				t.Fatalf("pool holds %d, claims hold %d (G=%d)", pool.inUse(), held, g)
			}
		}
		steps := rapid.IntRange(0, 60).Draw(t, "steps")
		for range steps {
			c := claims[rapid.IntRange(0, len(claims)-1).Draw(t, "claim")]
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				before, lim := pool.inUse(), pool.limit()
				var ok bool
				if rapid.Bool().Draw(t, "try") {
					ok = c.tryAcquire()
				} else {
					ok = c.acquire(ctx, nil, nil)
				}
				if ok && before >= lim {
					t.Fatalf("a credit was granted with %d held at a limit of %d", before, lim)
				}
			case 2:
				if h := c.heldNow(); h > 0 {
					if err := c.release(rapid.IntRange(1, h).Draw(t, "n")); err != nil {
						t.Fatalf("release of held credits: %v", err)
					}
				}
			case 3:
				before := c.heldNow()
				err := c.release(before + 1)
				if c.held.Load() != closedBook && err == nil {
					t.Fatalf("over-release of %d with %d held was accepted", before+1, before)
				}
				if c.heldNow() != before {
					t.Fatalf("over-release changed the book: %d -> %d", before, c.heldNow())
				}
			case 4:
				c.close()
				if err := c.release(1); err != nil {
					t.Fatalf("release after close: %v", err)
				}
			case 5:
				if adaptive != nil {
					adaptive.setLimit(rapid.IntRange(1, g).Draw(t, "newLimit"))
				}
			}
			check()
		}
		for _, c := range claims {
			c.close()
		}
		if pool.inUse() != 0 {
			t.Fatalf("pool holds %d after every claim closed", pool.inUse())
		}
	})
}

func TestCreditsOverReleaseDoesNotBlock(t *testing.T) {
	c := newCredits(2)
	c <- struct{}{}
	if err := c.release(2); err == nil {
		t.Fatal("releasing 2 of 1 held gave no error")
	}
	if c.inUse() != 0 {
		t.Fatalf("in use %d after releasing what was held", c.inUse())
	}
}

// Every attempt's deadline is at least the timeout after it starts and at
// most a tick more, though attempts of one tick share a context; the shared
// context also ends with its parent.
func TestAttemptDeadlinesBoundEachAttempt(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	d := newAttemptDeadlines(parent, time.Second)
	base := time.Now()
	var first context.Context
	for i := range 50 {
		now := base.Add(time.Duration(i) * 7 * time.Millisecond)
		ctx := d.context(now)
		deadline, ok := ctx.Deadline()
		if !ok || deadline.Before(now.Add(time.Second)) || deadline.After(now.Add(time.Second+d.tick)) {
			t.Fatalf("attempt at +%v: deadline +%v (ok %v), want within [+1s, +1s+%v] of its start", now.Sub(base), deadline.Sub(base), ok, d.tick)
		}
		if i == 0 {
			first = ctx
		}
	}
	cancel()
	if first.Err() == nil {
		t.Fatal("an attempt's context outlived its parent")
	}
	if got := newAttemptDeadlines(parent, 0).context(time.Now()); got != parent {
		t.Fatal("no timeout: the attempt should get the parent itself")
	}
}

// The adaptive pool serves its waiters in arrival order as credits come
// back or its limit rises, grants none while a lowered limit is still
// exceeded, and a waiter that gives up is never left holding a credit.
func TestAdaptiveCreditsServeWaitersInOrder(t *testing.T) {
	p := newAdaptiveCredits(2)
	granted := 0
	for range 3 {
		if p.tryAcquire() {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("a limit of 2 granted %d credits", granted)
	}
	const waiters = 4
	order := make(chan int, waiters)
	cancelled, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	for i := range waiters {
		go func() {
			if p.acquire(context.Background(), nil, nil) {
				order <- i
			}
		}()
		waitUntil(t, fmt.Sprintf("waiter %d queued", i), func() bool { return p.queued() == i+1 })
	}
	go func() { done <- p.acquire(cancelled, nil, nil) }() // the fifth, which gives up
	waitUntil(t, "fifth waiter queued", func() bool { return p.queued() == waiters+1 })

	p.setLimit(1) // lowered under what is held: nothing may be granted
	if err := p.release(1); err != nil {
		t.Fatal(err)
	}
	if p.queued() != waiters+1 || p.inUse() != 1 {
		t.Fatalf("a release at the lowered limit granted a credit: held %d, queued %d", p.inUse(), p.queued())
	}
	// One credit at a time, so the order seen is the order granted.
	expect := func(want int) {
		t.Helper()
		if got := <-order; got != want {
			t.Fatalf("granted waiter %d, want %d", got, want)
		}
	}
	p.setLimit(2)
	expect(0)
	p.setLimit(3)
	expect(1)
	cancel()
	if <-done {
		t.Fatal("the cancelled waiter was granted a credit with none free")
	}
	for _, want := range []int{2, 3} {
		if err := p.release(1); err != nil {
			t.Fatal(err)
		}
		expect(want)
	}
	if p.inUse() != 3 || p.queued() != 0 {
		t.Fatalf("held %d, queued %d; want 3 and 0", p.inUse(), p.queued())
	}
}

// A waiter whose context ends as it is granted gives the credit to the
// next waiter: credits never leak, whichever way the race goes.
func TestAdaptiveCreditsGrantRacingCancelLeaksNothing(t *testing.T) {
	for range 200 {
		p := newAdaptiveCredits(1)
		p.tryAcquire()
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan bool, 1)
		go func() { first <- p.acquire(ctx, nil, nil) }()
		waitUntil(t, "first waiter queued", func() bool { return p.queued() == 1 })
		second := make(chan bool, 1)
		go func() { second <- p.acquire(context.Background(), nil, nil) }()
		waitUntil(t, "second waiter queued", func() bool { return p.queued() == 2 })
		go cancel()
		if err := p.release(1); err != nil {
			t.Fatal(err)
		}
		got := <-first
		if !got {
			if !<-second {
				t.Fatal("the second waiter was never granted the credit the first gave up")
			}
		} else if err := p.release(1); err != nil { // the first kept it: give it back for the second
			t.Fatal(err)
		} else if !<-second {
			t.Fatal("the second waiter was never granted")
		}
		if p.inUse() != 1 || p.queued() != 0 {
			t.Fatalf("held %d, queued %d; want exactly the second waiter's credit", p.inUse(), p.queued())
		}
	}
}
