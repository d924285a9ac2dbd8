// Package actortest is an Akka-style test probe for protoactor-go: an actor
// that records every message it receives so a test can expect them in order,
// and that can parent children so their messages to Parent() reach the test.
//
// Probe protocol
//
//	in  any user message     queued for ExpectMsg / ExpectNoMsg, with its sender
//	                         (lifecycle messages and children's Terminated are not queued)
//	in  child failure        queued as *ChildFailed; the child is stopped, never restarted
//	in  spawnChild           (internal) spawns props as the probe's child
//	out whatever the test sends through Send, Request or Reply
package actortest

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultTimeout is how long ExpectMsg waits when the test passes 0.
const DefaultTimeout = 3 * time.Second

// Envelope is one message the probe received.
type Envelope struct {
	Message any
	Sender  *actor.PID
}

// ChildFailed is queued when a child of the probe panics.
type ChildFailed struct {
	Child   *actor.PID
	Reason  any
	Message any // the message the child was processing, unwrapped from its envelope
}

type spawnChild struct {
	props *actor.Props
	reply chan *actor.PID
}

// Probe is a test actor. Create it with NewProbe; it stops when the test ends.
type Probe struct {
	t      testing.TB
	system *actor.ActorSystem
	pid    *actor.PID
	inbox  chan Envelope
	last   atomic.Pointer[Envelope]
}

var probes atomic.Int64

// NewProbe spawns a probe in system.
func NewProbe(t testing.TB, system *actor.ActorSystem) *Probe {
	t.Helper()
	p := &Probe{t: t, system: system, inbox: make(chan Envelope, 4096)}
	props := actor.PropsFromProducer(func() actor.Actor { return &probeActor{p: p} })
	pid, err := system.Root.SpawnNamed(props, fmt.Sprintf("probe-%d", probes.Add(1)))
	if err != nil {
		t.Fatalf("spawn probe: %v", err)
	}
	p.pid = pid
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	return p
}

// PID returns the probe's address.
func (p *Probe) PID() *actor.PID { return p.pid }

// SpawnChild spawns props as a child of the probe, so the child's messages
// to its parent, and its failures, come to the probe.
func (p *Probe) SpawnChild(props *actor.Props) *actor.PID {
	p.t.Helper()
	reply := make(chan *actor.PID, 1)
	p.system.Root.Send(p.pid, &spawnChild{props: props, reply: reply})
	select {
	case pid := <-reply:
		return pid
	case <-time.After(DefaultTimeout):
		p.t.Fatal("probe did not spawn its child")
		return nil
	}
}

// Send sends msg to pid with the probe as sender, so replies come back here.
func (p *Probe) Send(pid *actor.PID, msg any) {
	p.system.Root.RequestWithCustomSender(pid, msg, p.pid)
}

// Reply answers the sender of the last message taken by ExpectMsg.
func (p *Probe) Reply(msg any) {
	p.t.Helper()
	last := p.last.Load()
	if last == nil || last.Sender == nil {
		p.t.Fatal("Reply: the last message had no sender")
		return
	}
	p.system.Root.RequestWithCustomSender(last.Sender, msg, p.pid)
}

// Next waits up to timeout (DefaultTimeout when 0) for the next message.
func (p *Probe) Next(timeout time.Duration) (Envelope, bool) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case e := <-p.inbox:
		p.last.Store(&e)
		return e, true
	case <-t.C:
		return Envelope{}, false
	}
}

// ExpectMsg waits for the next message and fails the test unless it arrives
// within timeout (DefaultTimeout when 0) and has type T.
func ExpectMsg[T any](p *Probe, timeout time.Duration) T {
	p.t.Helper()
	var zero T
	e, ok := p.Next(timeout)
	if !ok {
		p.t.Fatalf("ExpectMsg[%v]: no message within %v", reflect.TypeFor[T](), orDefault(timeout))
		return zero
	}
	m, ok := e.Message.(T)
	if !ok {
		p.t.Fatalf("ExpectMsg[%v]: got %T %v", reflect.TypeFor[T](), e.Message, e.Message)
		return zero
	}
	return m
}

// ExpectNoMsg fails the test if any message arrives within d.
func (p *Probe) ExpectNoMsg(d time.Duration) {
	p.t.Helper()
	select {
	case e := <-p.inbox:
		p.t.Fatalf("ExpectNoMsg: got %T %v", e.Message, e.Message)
	case <-time.After(d):
	}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}

type probeActor struct{ p *Probe }

func (a *probeActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
		// lifecycle, and the notice every parent gets when a child stops
	case *spawnChild:
		m.reply <- c.Spawn(m.props)
	default:
		a.p.inbox <- Envelope{Message: m, Sender: c.Sender()}
	}
}

// HandleFailure implements actor.SupervisorStrategy: a failing child is
// stopped and reported as *ChildFailed.
func (a *probeActor) HandleFailure(_ *actor.ActorSystem, s actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, message any) {
	s.StopChildren(child)
	a.p.inbox <- Envelope{Message: &ChildFailed{Child: child, Reason: reason, Message: actor.UnwrapEnvelopeMessage(message)}}
}
