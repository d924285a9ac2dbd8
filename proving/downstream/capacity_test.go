package downstream_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/proving/downstream"
)

const patience = 5 * time.Second

// call is one Acquire running in its own goroutine.
type call struct {
	cancel context.CancelFunc
	result chan error // gets Acquire's return
}

func startCall(c *downstream.Capacity) *call {
	ctx, cancel := context.WithCancel(context.Background())
	cl := &call{cancel: cancel, result: make(chan error, 1)}
	go func() { cl.result <- c.Acquire(ctx) }()
	return cl
}

type fataler interface {
	Helper()
	Fatalf(string, ...any)
}

func (cl *call) wait(t fataler, what string) error {
	t.Helper()
	select {
	case err := <-cl.result:
		return err
	case <-time.After(patience):
		t.Fatalf("%s: Acquire did not return within %v", what, patience)
		return nil
	}
}

func (cl *call) returned() bool {
	select {
	case err := <-cl.result:
		cl.result <- err
		return true
	default:
		return false
	}
}

func eventually(t fataler, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", patience, what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// The gate against a model of it: after random acquisitions, releases,
// cancellations and limit changes, the same calls are served and queued as
// in the model, which grants a slot only while fewer than the limit are
// served, and only to the oldest waiter. At the end, when every call has
// been released or cancelled, no slot is held.
func TestCapacityMatchesItsModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(0, 3).Draw(t, "limit")
		g := downstream.NewCapacity(limit)
		calls := map[int]*call{}
		var queue, serving []int // ids; queue oldest first
		next := 0
		defer func() { // never leave an Acquire running, even on failure
			for _, cl := range calls {
				cl.cancel()
			}
		}()
		// grantModel gives free slots to the oldest waiters, as the gate
		// must, and waits for exactly those calls to return nil.
		grantModel := func() {
			var granted []int
			for len(queue) > 0 && (limit == 0 || len(serving) < limit) {
				granted = append(granted, queue[0])
				serving = append(serving, queue[0])
				queue = queue[1:]
			}
			returned := func(ids []int) bool {
				return slices.ContainsFunc(ids, func(id int) bool { return calls[id].returned() })
			}
			eventually(t, "the oldest waiters are granted", func() bool {
				return returned(queue) || !slices.ContainsFunc(granted, func(id int) bool { return !calls[id].returned() })
			})
			for _, id := range queue {
				if calls[id].returned() {
					t.Fatalf("call %d returned, but the free slots go to the %d oldest waiters, %v", id, len(granted), granted)
				}
			}
			for _, id := range granted {
				if err := calls[id].wait(t, "a granted waiter"); err != nil {
					t.Fatalf("call %d, among the oldest waiters, got %v, want its slot", id, err)
				}
			}
		}
		check := func(op string) {
			if g.Serving() != len(serving) || g.Queued() != len(queue) || g.Limit() != limit {
				t.Fatalf("after %s: serving %d, queued %d, limit %d; the model has %d, %d, %d",
					op, g.Serving(), g.Queued(), g.Limit(), len(serving), len(queue), limit)
			}
			for _, id := range queue {
				if calls[id].returned() {
					t.Fatalf("after %s: call %d returned while waiting behind the limit", op, id)
				}
			}
		}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 4).Draw(t, "op"); op {
			case 0, 1: // a new call
				id := next
				next++
				cl := startCall(g)
				calls[id] = cl
				if limit == 0 || (len(serving) < limit && len(queue) == 0) {
					if err := cl.wait(t, "a call with a free slot"); err != nil {
						t.Fatalf("call %d with a free slot: %v", id, err)
					}
					serving = append(serving, id)
				} else {
					queue = append(queue, id)
					eventually(t, "the new call queues", func() bool { return g.Queued() == len(queue) || cl.returned() })
				}
				check("acquire")
			case 2: // a served call finishes
				if len(serving) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(serving)-1).Draw(t, "release")
				serving = slices.Delete(serving, i, i+1)
				g.Release()
				grantModel()
				check("release")
			case 3: // a call's context ends: a waiter leaves, a served call keeps its slot
				ids := append(slices.Clone(queue), serving...)
				if len(ids) == 0 {
					continue
				}
				id := rapid.SampledFrom(ids).Draw(t, "cancel")
				calls[id].cancel()
				if i := slices.Index(queue, id); i >= 0 {
					queue = slices.Delete(queue, i, i+1)
					if err := calls[id].wait(t, "a cancelled waiter"); !errors.Is(err, context.Canceled) {
						t.Fatalf("cancelled waiter %d: %v, want context.Canceled", id, err)
					}
				}
				check("cancel")
			case 4:
				limit = rapid.IntRange(0, 4).Draw(t, "new limit")
				g.SetLimit(limit)
				grantModel()
				check("set limit")
			}
		}
		for _, id := range queue {
			calls[id].cancel()
			if err := calls[id].wait(t, "a cancelled waiter"); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiter %d: %v", id, err)
			}
		}
		queue = nil
		for range serving {
			g.Release()
		}
		serving = nil
		check("the end")
	})
}

// signalling is a context whose Done, the first time it is asked for,
// calls onDone and then reports the context ended: Acquire's wait finds
// both its grant (if onDone grants it) and its context's end ready at once.
type signalling struct {
	context.Context
	once   sync.Once
	onDone func()
	done   chan struct{}
}

func (s *signalling) Done() <-chan struct{} {
	s.once.Do(func() { s.onDone(); close(s.done) })
	return s.done
}

func (s *signalling) Err() error {
	select {
	case <-s.done:
		return context.Canceled
	default:
		return nil
	}
}

// A waiter granted its slot at the moment its context ends either keeps
// the slot (nil) or gives it back to the next waiter (ctx.Err()); no slot is
// lost or doubled either way.
func TestCancellationRacingAGrant(t *testing.T) {
	var kept, givenBack int
	for range 200 {
		g := downstream.NewCapacity(1)
		if err := g.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		next := startCall(g) // queued behind the holder and the racer
		eventually(t, "the first waiter queues", func() bool { return g.Queued() == 1 })
		ctx := &signalling{Context: context.Background(), done: make(chan struct{}), onDone: func() {
			// The racer is queued by now, behind next: release twice so the
			// slot reaches it (next's slot returns when next is released).
			g.Release()
			if err := next.wait(t, "the first waiter"); err != nil {
				t.Fatalf("the first waiter: %v", err)
			}
			g.Release()
		}}
		err := g.Acquire(ctx)
		switch {
		case err == nil:
			kept++
			if g.Serving() != 1 || g.Queued() != 0 {
				t.Fatalf("kept its slot: serving %d, queued %d, want 1, 0", g.Serving(), g.Queued())
			}
			g.Release()
		case errors.Is(err, context.Canceled):
			givenBack++
		default:
			t.Fatalf("racer: %v", err)
		}
		if g.Serving() != 0 || g.Queued() != 0 {
			t.Fatalf("after the race: serving %d, queued %d, want none", g.Serving(), g.Queued())
		}
		// The slot is free: a new call takes it at once.
		if err := g.Acquire(context.Background()); err != nil || g.Serving() != 1 {
			t.Fatalf("after the race the slot is not free: %v, serving %d", err, g.Serving())
		}
	}
	if kept == 0 || givenBack == 0 {
		t.Fatalf("the race went one way only (kept %d, given back %d): the give-back path was not exercised", kept, givenBack)
	}
}

// The same race between real goroutines, with a waiter behind the racer
// that must get the slot whichever way the race goes.
func TestCancellationRacingAReleaseConcurrently(t *testing.T) {
	for range 500 {
		g := downstream.NewCapacity(1)
		if err := g.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		racer := startCall(g)
		eventually(t, "the racer queues", func() bool { return g.Queued() == 1 })
		behind := startCall(g)
		eventually(t, "the second waiter queues", func() bool { return g.Queued() == 2 })
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; g.Release() })
		wg.Go(func() { <-start; racer.cancel() })
		close(start)
		wg.Wait()
		if err := racer.wait(t, "the racer"); err == nil {
			g.Release() // it kept the slot; behind gets it now
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("racer: %v", err)
		}
		if err := behind.wait(t, "the waiter behind"); err != nil {
			t.Fatalf("the waiter behind: %v", err)
		}
		if g.Serving() != 1 || g.Queued() != 0 {
			t.Fatalf("serving %d, queued %d, want 1, 0", g.Serving(), g.Queued())
		}
		g.Release()
		behind.cancel()
	}
}

// Many goroutines through the gate while its limit changes: never more are
// served at once than the highest limit set, never more than the limit
// while it holds still, and nothing is held or queued at the end.
func TestCapacityUnderLoad(t *testing.T) {
	g := downstream.NewCapacity(3)
	var cur, peak atomic.Int64
	served := func(ctx context.Context) {
		if g.Acquire(ctx) != nil {
			return
		}
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Microsecond)
		cur.Add(-1)
		g.Release()
	}
	run := func(changeLimit bool) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for j := 0; ; j++ {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i+j)%5)*50*time.Microsecond)
					served(ctx)
					cancel()
				}
			})
		}
		if changeLimit {
			wg.Go(func() {
				for k := 0; ; k++ {
					select {
					case <-stop:
						g.SetLimit(3)
						return
					case <-time.After(time.Millisecond):
						g.SetLimit(1 + k%5)
					}
				}
			})
		}
		time.Sleep(150 * time.Millisecond)
		close(stop)
		wg.Wait()
	}
	run(false)
	if p := peak.Load(); p > 3 || p == 0 {
		t.Fatalf("limit 3: at most %d served at once", p)
	}
	peak.Store(0)
	run(true)
	if p := peak.Load(); p > 5 || p == 0 {
		t.Fatalf("limits 1 to 5: at most %d served at once", p)
	}
	if g.Serving() != 0 || g.Queued() != 0 {
		t.Fatalf("at the end: serving %d, queued %d", g.Serving(), g.Queued())
	}
}

// A nil gate and a gate of limit 0 admit every call at once; a gate of
// limit 0 still counts them, so that a limit set later counts the calls
// already being served.
func TestUnlimited(t *testing.T) {
	var none *downstream.Capacity
	for range 100 {
		if err := none.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	none.Release()
	if none.Limit() != 0 || none.Serving() != 0 || none.Queued() != 0 {
		t.Fatal("a nil gate counts")
	}
	g := downstream.NewCapacity(0)
	for range 3 {
		if err := g.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	g.SetLimit(2)
	w := startCall(g)
	eventually(t, "a call queues behind the three served", func() bool { return g.Queued() == 1 })
	g.Release()
	if w.returned() || g.Serving() != 2 {
		t.Fatalf("granted at 2 served with limit 2 (serving %d)", g.Serving())
	}
	g.Release()
	if err := w.wait(t, "the waiter"); err != nil || g.Serving() != 2 {
		t.Fatalf("the waiter: %v, serving %d", err, g.Serving())
	}
	g.Release()
	g.Release()
	w.cancel()
}

// A call whose context has already ended is admitted when a slot is free,
// and refused at once when it would have to wait.
func TestEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := downstream.NewCapacity(1)
	if err := g.Acquire(ctx); err != nil {
		t.Fatalf("free slot: %v", err)
	}
	if err := g.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("full gate: %v", err)
	}
	if g.Serving() != 1 || g.Queued() != 0 {
		t.Fatalf("serving %d, queued %d", g.Serving(), g.Queued())
	}
	g.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("a Release without Acquire did not panic")
		}
	}()
	g.Release()
}
