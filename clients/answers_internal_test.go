package clients

import (
	"context"
	"testing"

	"pgregory.net/rapid"
)

// Every byte an answer takes from the budget comes back exactly once,
// whatever the sequence of reserves, growths, shrinks and releases of the
// answers sharing it: the budget's use is always the sum of what the
// reservations hold, within the budget; a reservation is granted (at once,
// or never: what does not fit fails when its wait ends) exactly when it
// fits, and a growth exactly when the rest is free now, or the answer
// holds the whole budget already; a second release gives nothing back.
func TestAnswerBudgetGivesBackEveryByteOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.Int64Range(1, 1000).Draw(rt, "size")
		b := NewAnswerBudget(size)
		var held []*reservation
		sum := func() int64 {
			n := int64(0)
			for _, r := range held {
				n += r.held
			}
			return n
		}
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		amount := rapid.Int64Range(-10, 1200)
		pick := func(rt *rapid.T) *reservation {
			return held[rapid.IntRange(0, len(held)-1).Draw(rt, "which")]
		}
		rt.Repeat(map[string]func(*rapid.T){
			"reserve": func(rt *rapid.T) {
				n := amount.Draw(rt, "n")
				fits := min(max(n, 0), size) <= size-sum()
				ctx := context.Background()
				if !fits {
					ctx = ended // the wait ends at once, as a deadline would
				}
				r, err := reserve(ctx, b, n)
				if fits != (err == nil) {
					rt.Fatalf("reserve %d with %d free: %v", n, size-sum(), err)
				}
				if err == nil && r.held != min(max(n, 0), size) {
					rt.Fatalf("reserve %d holds %d", n, r.held)
				}
				if err != nil && r.held != 0 {
					rt.Fatalf("a failed reserve holds %d", r.held)
				}
				held = append(held, r)
			},
			"grow": func(rt *rapid.T) {
				if len(held) == 0 {
					rt.Skip("nothing held")
				}
				r, n := pick(rt), amount.Draw(rt, "n")
				was, free := r.held, size-sum()
				want := min(max(n, 0), size) <= was+free
				if got := r.grow(n); got != want {
					rt.Fatalf("grow from %d to %d with %d free: %v", was, n, free, got)
				}
				if want && r.held != max(was, min(max(n, 0), size)) || !want && r.held != was {
					rt.Fatalf("grow from %d to %d holds %d", was, n, r.held)
				}
			},
			"shrink": func(rt *rapid.T) {
				if len(held) == 0 {
					rt.Skip("nothing held")
				}
				r, n := pick(rt), amount.Draw(rt, "n")
				was := r.held
				r.shrink(n)
				if r.held != min(was, max(n, 0)) {
					rt.Fatalf("shrink from %d to %d holds %d", was, n, r.held)
				}
			},
			"release": func(rt *rapid.T) {
				if len(held) == 0 {
					rt.Skip("nothing held")
				}
				pick(rt).release() // again, sometimes
			},
			"": func(rt *rapid.T) {
				s := b.Stats()
				if s.InUse != sum() || s.InUse < 0 || s.InUse > size || s.Peak < s.InUse || s.Peak > size {
					rt.Fatalf("the budget of %d has %d in use (peak %d), the reservations hold %d", size, s.InUse, s.Peak, sum())
				}
				// The semaphore agrees: exactly what is not held is free.
				if free := size - s.InUse; !b.sem.TryAcquire(free) || b.sem.TryAcquire(1) {
					rt.Fatalf("the semaphore does not have %d free", free)
				} else {
					b.sem.Release(free)
				}
			},
		})
		for _, r := range held {
			r.release()
		}
		if n := b.Stats().InUse; n != 0 || !b.sem.TryAcquire(size) {
			rt.Fatalf("%d bytes still in use once every answer gave its back", n)
		}
	})
}

// A nil budget bounds nothing: every reserve and growth succeeds, nothing
// is held.
func TestNilAnswerBudget(t *testing.T) {
	if NewAnswerBudget(0) != nil || NewAnswerBudget(-1) != nil {
		t.Fatal("a budget of no bytes is not nil")
	}
	r, err := reserve(context.Background(), nil, 1<<40)
	if err != nil || !r.grow(1<<50) || r.held != 0 {
		t.Fatalf("reserve on nil: %v, holds %d", err, r.held)
	}
	r.shrink(0)
	r.release()
	if s := (*AnswerBudget)(nil).Stats(); s != (AnswerBudgetStats{}) {
		t.Fatalf("stats of nil: %+v", s)
	}
}
