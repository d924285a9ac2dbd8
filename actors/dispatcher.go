package actors

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// warmDispatcher is a protoactor Dispatcher that runs mailboxes on parked
// goroutines it keeps for reuse. protoactor's default dispatcher starts a
// new goroutine every time an idle mailbox gets a message; with a child
// actor per record that is a goroutine per record, and each new goroutine
// also grows its stack by copying as the handler's call stack deepens
// (together about a fifth of the pipeline's CPU when handlers cost nothing).
// A parked goroutine is reused with the stack it has grown (until a garbage
// collection shrinks it, which is rare next to a record's lifetime).
//
// Schedule never blocks: when no goroutine is parked it starts one, which
// parks after running and so joins the set. Each partition actor has its own
// dispatcher, so the set grows to the most mailboxes of that partition that
// ran at once: at most S children plus the actor itself while credits bound
// what is admitted (the process-wide total is bounded by G plus one per
// claimed partition).
//
// The set also shrinks. A stall (a dependency down, records held to their
// deadline) raises how many run at once, and the load after it needs fewer.
// Waiting for one goroutine to sit idle for a while does not find them: a
// channel hands work to the goroutine parked longest, so every goroutine of
// the set keeps being used in turn however few the load needs. What does
// find them is the fewest goroutines that were parked at once during an
// interval: that many were never needed in it, and each trim retires that
// many (trimEvery, one timer per dispatcher). A load that keeps every
// goroutine busy at some moment of the interval retires none.
//
// Every goroutine in the set exits once close is called: a partition actor
// closes its dispatcher when it stops, so no goroutine outlives its claim
// for long.
type warmDispatcher struct {
	throughput int
	work       chan func()   // unbuffered: a send succeeds only into a parked goroutine
	retire     chan struct{} // unbuffered: a send succeeds only into a parked goroutine, which exits
	closed     chan struct{}
	closeOnce  sync.Once

	// parked counts goroutines in run's select or about to enter it; it is
	// lowered by whoever takes one out (Schedule, trimIdle), so a sample is
	// true at the moment of the hand-off.
	parked   atomic.Int64
	lowWater atomic.Int64 // fewest parked at once since the last trim

	trimMu    sync.Mutex
	trimTimer *time.Timer // nil when trimEvery is 0 (tests trim by hand)
	trimEvery time.Duration

	started atomic.Int64 // goroutines started, for tests
	exited  atomic.Int64 // goroutines that returned, for tests
}

var _ actor.Dispatcher = (*warmDispatcher)(nil)

// dispatcherTrimEvery is how long a goroutine the load does not need may
// stay parked: long next to a record's lifetime, so a burst's goroutines
// are not started again and again, and short next to the interval between
// a leak check's samples.
const dispatcherTrimEvery = 10 * time.Second

func newWarmDispatcher(throughput int) *warmDispatcher {
	return newTrimmedDispatcher(throughput, dispatcherTrimEvery)
}

// newTrimmedDispatcher trims every trimEvery; 0 leaves trimming to calls
// of trimIdle.
func newTrimmedDispatcher(throughput int, trimEvery time.Duration) *warmDispatcher {
	d := &warmDispatcher{throughput: throughput, work: make(chan func()), retire: make(chan struct{}),
		closed: make(chan struct{}), trimEvery: trimEvery}
	if trimEvery > 0 {
		d.trimMu.Lock()
		d.trimTimer = time.AfterFunc(trimEvery, d.trimTick)
		d.trimMu.Unlock()
	}
	return d
}

// Schedule implements actor.Dispatcher.
func (d *warmDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
		// Counted here, not by the receiver: a sender inside a mailbox run
		// parks again before the receiver runs, and would be sampled as
		// parked while it had the set all in use.
		d.lower(d.parked.Add(-1))
	default:
		// None was parked: the set was all in use at this moment.
		d.lowWater.Store(0)
		d.started.Add(1)
		go d.run(fn)
	}
}

// Throughput implements actor.Dispatcher: messages a mailbox handles before
// it yields.
func (d *warmDispatcher) Throughput() int { return d.throughput }

func (d *warmDispatcher) run(fn func()) {
	defer d.exited.Add(1)
	for {
		fn()
		d.parked.Add(1)
		select {
		case fn = <-d.work: // Schedule counted it out
		case <-d.retire: // trimIdle counted it out
			return
		case <-d.closed:
			d.parked.Add(-1)
			return
		}
	}
}

// lower records n parked goroutines in the interval's low water.
func (d *warmDispatcher) lower(n int64) {
	for lw := d.lowWater.Load(); n < lw; lw = d.lowWater.Load() {
		if d.lowWater.CompareAndSwap(lw, n) {
			return
		}
	}
}

// trimIdle retires as many parked goroutines as were parked throughout the
// interval that ends now, and starts the next interval. It returns how many
// it retired.
func (d *warmDispatcher) trimIdle() int {
	idle := d.lowWater.Swap(math.MaxInt64)
	retired := 0
retiring:
	for ; idle > 0; idle-- {
		select {
		case d.retire <- struct{}{}:
			d.parked.Add(-1)
			retired++
		default:
			break retiring // none parked now: the rest are already at work
		}
	}
	d.lower(d.parked.Load())
	return retired
}

func (d *warmDispatcher) trimTick() {
	d.trimIdle()
	d.trimMu.Lock()
	defer d.trimMu.Unlock()
	select {
	case <-d.closed:
	default:
		d.trimTimer.Reset(d.trimEvery)
	}
}

// close lets every parked goroutine exit and stops trimming; later
// schedules still run, each on a goroutine that exits when done.
func (d *warmDispatcher) close() {
	d.closeOnce.Do(func() {
		d.trimMu.Lock()
		close(d.closed)
		if d.trimTimer != nil {
			d.trimTimer.Stop()
		}
		d.trimMu.Unlock()
	})
}
