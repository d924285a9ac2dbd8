package actors

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Every byte charged comes back to the budget exactly once, and every byte
// lent is taken back exactly once, whatever order claims charge, give back,
// lend, take back, over-give and close in: after every step the budget
// holds exactly what the open claims hold, and lends what their records
// waiting for evidence lend; a charge is granted exactly when it fits the
// budget and what is lent (at most the budget again); once every claim is
// closed it holds and lends nothing. A record larger than the budget is
// charged the whole budget; an over-release (or a release of lent bytes) is
// an error that changes nothing; a release or a loan after close is a no-op.
func TestClaimBytesComeBackExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.Int64Range(1, 1000).Draw(t, "size")
		budget := newByteBudget(size)
		type record struct {
			charge  int64
			lending bool
		}
		claims := make([]*claimBytes, rapid.IntRange(1, 4).Draw(t, "claims"))
		// records[i] is what claim i's worker knows of the records it holds.
		records := make([][]record, len(claims))
		for i := range claims {
			claims[i] = newClaimBytes(budget)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // acquire never waits: a full budget answers false at once
		check := func() {
			var held, lent int64
			for i, c := range claims {
				var want, wantLent int64
				for _, r := range records[i] {
					want += r.charge
					if r.lending {
						wantLent += r.charge
					}
				}
				if c.heldNow() != want || c.lentNow() != wantLent {
					t.Fatalf("claim %d holds %d bytes and lends %d, its records were charged %d and lend %d", i, c.heldNow(), c.lentNow(), want, wantLent)
				}
				held += c.heldNow()
				lent += c.lentNow()
			}
			if bh, bl := budget.state(); bh != held || bl != lent {
				t.Fatalf("budget holds %d and lends %d, claims hold %d and lend %d (size %d)", bh, bl, held, lent, size)
			}
		}
		for range rapid.IntRange(0, 80).Draw(t, "steps") {
			i := rapid.IntRange(0, len(claims)-1).Draw(t, "claim")
			c := claims[i]
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				n := rapid.Int64Range(0, 2*size).Draw(t, "bytes")
				before, lent := budget.state()
				var ok bool
				if rapid.Bool().Draw(t, "try") {
					ok = c.tryAcquire(n)
				} else {
					ok = c.acquire(ctx, n, nil, nil)
				}
				if fits := before+budget.charge(n) <= size+min(lent, size); ok != (fits && !c.closed) {
					t.Fatalf("charge of %d with %d of %d held, %d lent (closed %v): granted %v", n, before, size, lent, c.closed, ok)
				}
				if ok {
					records[i] = append(records[i], record{charge: budget.charge(n)})
				}
			case 2:
				// The worker gives back a few records at once, by their
				// charges, taking back what they lend first.
				if k := len(records[i]); k > 0 {
					m := rapid.IntRange(1, k).Draw(t, "records")
					var sum int64
					for j, r := range records[i][:m] {
						if r.lending {
							if err := c.lend(-r.charge); err != nil {
								t.Fatalf("taking back a loan: %v", err)
							}
							records[i][j].lending = false
						}
						sum += r.charge
					}
					if err := c.release(sum); err != nil {
						t.Fatalf("release of held records: %v", err)
					}
					records[i] = records[i][m:]
				}
			case 3:
				before, lent := c.heldNow(), c.lentNow()
				if err := c.release(before - lent + 1); err == nil && !c.closed {
					t.Fatalf("over-release of %d with %d held, %d lent was accepted", before-lent+1, before, lent)
				}
				if err := c.lend(before - lent + 1); err == nil && !c.closed {
					t.Fatalf("loan of %d with %d held, %d lent was accepted", before-lent+1, before, lent)
				}
				if c.heldNow() != before || c.lentNow() != lent {
					t.Fatalf("refused calls changed the book: %d/%d -> %d/%d", before, lent, c.heldNow(), c.lentNow())
				}
			case 4:
				c.close()
				records[i] = nil
				if err := c.release(1); err != nil {
					t.Fatalf("release after close: %v", err)
				}
				if err := c.lend(1); err != nil {
					t.Fatalf("loan after close: %v", err)
				}
			case 5:
				// A record starts or stops waiting for evidence.
				if k := len(records[i]); k > 0 {
					j := rapid.IntRange(0, k-1).Draw(t, "record")
					r := &records[i][j]
					delta := r.charge
					if r.lending {
						delta = -delta
					}
					if err := c.lend(delta); err != nil {
						t.Fatalf("loan of a held record: %v", err)
					}
					r.lending = !r.lending
				}
			}
			check()
		}
		for _, c := range claims {
			c.close()
		}
		if held, lent := budget.state(); held != 0 || lent != 0 {
			t.Fatalf("budget holds %d and lends %d after every claim closed", held, lent)
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
	waitFor(t, func() bool { return budget.queued() == 1 }, "the big record to queue")
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
	if held, _ := budget.state(); held != 80 {
		t.Fatalf("budget holds %d, want the big record's 80", held)
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
