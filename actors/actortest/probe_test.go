package actortest_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors/actortest"
)

type ping struct{ n int }
type pong struct{ n int }
type boom struct{}

// child answers ping with pong to its sender, reports to its parent, and
// panics on boom.
type child struct{}

func (child) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *ping:
		c.Send(c.Parent(), &pong{n: m.n})
		c.Respond(&pong{n: -m.n})
	case *boom:
		panic(errors.New("boom"))
	}
}

func TestProbe(t *testing.T) {
	system := quietSystem()
	defer system.Shutdown()
	p := actortest.NewProbe(t, system)
	kid := p.SpawnChild(actor.PropsFromProducer(func() actor.Actor { return child{} }))

	p.Send(kid, &ping{n: 3})
	// the child's message to its parent and its reply to the sender both reach the probe
	got := map[int]bool{}
	for range 2 {
		got[actortest.ExpectMsg[*pong](p, time.Second).n] = true
	}
	if !got[3] || !got[-3] {
		t.Fatalf("got %v, want pongs 3 and -3", got)
	}
	p.ExpectNoMsg(50 * time.Millisecond)

	p.Send(kid, &boom{})
	f := actortest.ExpectMsg[*actortest.ChildFailed](p, time.Second)
	if f.Child.GetId() != kid.GetId() {
		t.Fatalf("failure of %v, want %v", f.Child, kid)
	}
	if _, ok := f.Message.(*boom); !ok {
		t.Fatalf("failure while processing %T, want *boom", f.Message)
	}

	// Reply answers the sender of the last message taken.
	other := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*ping); ok {
			c.Request(p.PID(), &ping{n: 9}) // with the child as sender
		}
		if m, ok := c.Message().(*pong); ok {
			c.Send(p.PID(), &pong{n: m.n + 1})
		}
	}))
	system.Root.Send(other, &ping{})
	actortest.ExpectMsg[*ping](p, time.Second)
	p.Reply(&pong{n: 41})
	if n := actortest.ExpectMsg[*pong](p, time.Second).n; n != 42 {
		t.Fatalf("reply round trip gave %d", n)
	}
}

// ExpectMsg fails the test on a message of the wrong type.
func TestExpectMsgFailsOnWrongType(t *testing.T) {
	system := quietSystem()
	defer system.Shutdown()
	ft := &fakeT{TB: t}
	p := actortest.NewProbe(ft, system)
	system.Root.Send(p.PID(), &ping{})
	func() {
		defer func() { _ = recover() }()
		actortest.ExpectMsg[*pong](p, time.Second)
	}()
	if !ft.failed {
		t.Fatal("ExpectMsg accepted a *ping as *pong")
	}
}

func quietSystem() *actor.ActorSystem {
	logger := slog.New(slog.DiscardHandler)
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
}

// fakeT records Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic("fatal") }
func (f *fakeT) Helper()               {}
