package actors

import (
	"sync"
	"sync/atomic"

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
// dispatcher, so the set is as large as the most mailboxes of that partition
// that ran at once: at most S children plus the actor itself while credits
// bound what is admitted (the process-wide total is bounded by G plus one per
// claimed partition). Every goroutine in the set exits once close is called:
// a partition actor closes its dispatcher when it stops, so no goroutine
// outlives its claim for long.
type warmDispatcher struct {
	throughput int
	work       chan func() // unbuffered: a send succeeds only into a parked goroutine
	closed     chan struct{}
	closeOnce  sync.Once
	started    atomic.Int64 // goroutines started, for tests
}

var _ actor.Dispatcher = (*warmDispatcher)(nil)

func newWarmDispatcher(throughput int) *warmDispatcher {
	return &warmDispatcher{throughput: throughput, work: make(chan func()), closed: make(chan struct{})}
}

// Schedule implements actor.Dispatcher.
func (d *warmDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		d.started.Add(1)
		go d.run(fn)
	}
}

// Throughput implements actor.Dispatcher: messages a mailbox handles before
// it yields.
func (d *warmDispatcher) Throughput() int { return d.throughput }

func (d *warmDispatcher) run(fn func()) {
	for {
		fn()
		select {
		case fn = <-d.work:
		case <-d.closed:
			return
		}
	}
}

// close lets every parked goroutine exit; later schedules still run, each
// on a goroutine that exits when done.
func (d *warmDispatcher) close() {
	d.closeOnce.Do(func() { close(d.closed) })
}
