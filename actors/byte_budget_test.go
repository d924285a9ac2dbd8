package actors

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Every byte charged comes back to the budget exactly once, whatever order
// claims charge, give back, over-give and close in: after every step the
// budget holds exactly what the open claims hold, never more than its size,
// and once every claim is closed it holds nothing. A record larger than the
// budget is charged the whole budget; an over-release is an error that
// changes nothing; a release after close is a no-op.
func TestClaimBytesComeBackExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.Int64Range(1, 1000).Draw(t, "size")
		budget := newByteBudget(size)
		claims := make([]*claimBytes, rapid.IntRange(1, 4).Draw(t, "claims"))
		// records[i] are the sizes of what claim i holds, as its worker knows them.
		records := make([][]int64, len(claims))
		for i := range claims {
			claims[i] = newClaimBytes(budget)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // acquire never waits: a full budget answers false at once
		check := func() {
			var held int64
			for i, c := range claims {
				var want int64
				for _, n := range records[i] {
					want += budget.charge(n)
				}
				if c.heldNow() != want {
					t.Fatalf("claim %d holds %d bytes, its records were charged %d", i, c.heldNow(), want)
				}
				held += c.heldNow()
			}
			if budget.inUse.Load() != held || held > size {
				t.Fatalf("budget holds %d, claims hold %d (size %d)", budget.inUse.Load(), held, size)
			}
		}
		for range rapid.IntRange(0, 60).Draw(t, "steps") {
			i := rapid.IntRange(0, len(claims)-1).Draw(t, "claim")
			c := claims[i]
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1:
				n := rapid.Int64Range(0, 2*size).Draw(t, "bytes")
				before := budget.inUse.Load()
				var ok bool
				if rapid.Bool().Draw(t, "try") {
					ok = c.tryAcquire(n)
				} else {
					ok = c.acquire(ctx, n, nil, nil)
				}
				if fits := before+budget.charge(n) <= size; ok != (fits && !c.closed) {
					t.Fatalf("charge of %d with %d of %d held (closed %v): granted %v", n, before, size, c.closed, ok)
				}
				if ok {
					records[i] = append(records[i], n)
				}
			case 2:
				if k := len(records[i]); k > 0 {
					// The worker gives back a few records at once, by their sizes.
					m := rapid.IntRange(1, k).Draw(t, "records")
					var sum int64
					for _, n := range records[i][:m] {
						sum += n
					}
					if err := c.release(sum); err != nil {
						t.Fatalf("release of held records: %v", err)
					}
					records[i] = records[i][m:]
				}
			case 3:
				// (Over size, a sum is charged the whole budget: the
				// worker's sums of records it holds never are.)
				before := c.heldNow()
				if before+1 > size {
					break
				}
				if err := c.release(before + 1); err == nil && !c.closed {
					t.Fatalf("over-release of %d with %d held was accepted", before+1, before)
				}
				if c.heldNow() != before {
					t.Fatalf("over-release changed the book: %d -> %d", before, c.heldNow())
				}
			case 4:
				c.close()
				records[i] = nil
				if err := c.release(1); err != nil {
					t.Fatalf("release after close: %v", err)
				}
			}
			check()
		}
		for _, c := range claims {
			c.close()
		}
		if n := budget.inUse.Load(); n != 0 {
			t.Fatalf("budget holds %d after every claim closed", n)
		}
	})
}

// A large record waiting for room is served before smaller ones that come
// after it and would fit: first come, first served, so a partition whose
// next record is big is not starved by the others' small ones. The wait
// ends when bytes come back, and gives up when the claim ends.
func TestByteBudgetServesWaitersInOrder(t *testing.T) {
	budget := newByteBudget(100)
	small := newClaimBytes(budget)
	if !small.tryAcquire(60) {
		t.Fatal("60 of 100 refused on an empty budget")
	}
	big := newClaimBytes(budget)
	granted := make(chan bool, 1)
	go func() { granted <- big.acquire(context.Background(), 80, nil, nil) }()
	waitFor(t, func() bool { return budget.sem.TryAcquire(0) == false }, "the big record to queue")
	if small.tryAcquire(10) {
		t.Fatal("a small record overtook the big one waiting before it")
	}
	if err := small.release(60); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-granted:
		if !ok {
			t.Fatal("the big record's wait failed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the big record was not admitted once the bytes came back")
	}
	ended := make(chan struct{})
	gaveUp := make(chan bool, 1)
	go func() { gaveUp <- small.acquire(context.Background(), 50, nil, ended) }()
	close(ended)
	select {
	case ok := <-gaveUp:
		if ok {
			t.Fatal("a wait over a full budget succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end with the claim")
	}
	if budget.inUse.Load() != 80 {
		t.Fatalf("budget holds %d, want the big record's 80", budget.inUse.Load())
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
