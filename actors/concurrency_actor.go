package actors

// ConcurrencyActor protocol
//
//	in  *messages.HandlerSample    from the partition actors: one handler attempt's time, or a congestion signal
//	out adaptiveCredits.setLimit   the process-wide in-flight limit, each time a window of samples closes
//	out ConcurrencyState           published for /status, metrics and the progress log (Bridge.Concurrency)
//
// One ConcurrencyActor lives per Bridge whose Settings.Concurrency is
// ConcurrencyAdaptive. It alone owns the controller (limit.Controller);
// serialising the samples through its mailbox is what lets the controller
// be a plain data structure. With each sample it reads how many handler
// calls are running (not the credits held: records held back by the key
// gate or waiting to retry hold credits and reach no downstream), so the
// controller can tell a window the downstream limited from one the backlog
// or the gate did.

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/messages"
)

// ConcurrencyState is the process-wide in-flight limit at one moment.
type ConcurrencyState struct {
	// Mode is "adaptive" or "fixed".
	Mode string
	// Limit is the records the process may have in flight now; Floor and
	// Ceiling bound it (both are Limit when fixed).
	Limit, Floor, Ceiling int
	// Law is the adaptive control law; empty when fixed.
	Law string
	// Baseline is the no-load handler latency estimate, Latency the last
	// window's mean, Queue the records estimated to be queueing in the
	// downstream: Limit × (1 − Baseline/Latency). Zero when fixed or before
	// the first window.
	Baseline, Latency time.Duration
	Queue             float64
	// Probing is set while the limit is halved to re-measure the baseline;
	// SlowStart while the limit still doubles each window from the start.
	Probing, SlowStart bool
	// Windows counts the sample windows closed.
	Windows int
}

type concurrencyActor struct {
	ctl     *limit.Controller
	pool    *adaptiveCredits
	running *atomic.Int64
	state   *atomic.Pointer[ConcurrencyState]
	law     string
	floor   int
	ceil    int
}

func newConcurrencyActor(cfg limit.Config, pool *adaptiveCredits, running *atomic.Int64, state *atomic.Pointer[ConcurrencyState]) (*concurrencyActor, error) {
	ctl, err := limit.New(cfg)
	if err != nil {
		return nil, err
	}
	a := &concurrencyActor{ctl: ctl, pool: pool, running: running, state: state, law: cfg.Law.String(), floor: cfg.Floor, ceil: cfg.Ceiling}
	pool.setLimit(ctl.Limit())
	a.publish()
	return a, nil
}

// Receive implements actor.Actor.
func (a *concurrencyActor) Receive(c actor.Context) {
	m, ok := c.Message().(*messages.HandlerSample)
	if !ok {
		return
	}
	s := limit.Sample{Latency: m.GetHandlerTime().AsDuration(), Congested: m.GetCongested(), InFlight: int(a.running.Load())}
	if a.ctl.Observe(time.Now(), s) {
		a.pool.setLimit(a.ctl.Limit())
		a.publish()
	}
}

func (a *concurrencyActor) publish() {
	a.state.Store(&ConcurrencyState{Mode: ConcurrencyAdaptive.String(), Limit: a.ctl.Limit(), Floor: a.floor, Ceiling: a.ceil,
		Law: a.law, Baseline: a.ctl.Baseline(), Latency: a.ctl.Latency(), Queue: a.ctl.Queue(),
		Probing: a.ctl.Phase() != limit.Steady, SlowStart: a.ctl.SlowStart(), Windows: a.ctl.Windows()})
}
