package actors

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Every credit taken comes back to the pool exactly once, whatever order
// claims take, give back, over-give and close in: after every step the pool
// holds exactly what the open claims hold, and once every claim is closed it
// holds nothing. An over-release is an error that changes nothing; a release
// after close is a no-op.
func TestClaimCreditsComeBackExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := rapid.IntRange(1, 8).Draw(t, "G")
		s := rapid.IntRange(1, 4).Draw(t, "S")
		pool := newCredits(g)
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
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				c.tryAcquire()
			case 1:
				c.acquire(ctx, nil, nil)
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
