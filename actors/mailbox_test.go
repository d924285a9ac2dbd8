package actors

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// recordingInvoker records what a mailbox delivers, in order.
type recordingInvoker struct {
	mu        sync.Mutex
	got       []any
	escalated []any
	panicOn   any
	delivered chan struct{}
}

func (r *recordingInvoker) InvokeSystemMessage(m any) { r.note(m) }
func (r *recordingInvoker) InvokeUserMessage(m any) {
	if m == r.panicOn {
		panic("boom")
	}
	r.note(m)
}
func (r *recordingInvoker) EscalateFailure(reason any, m any) {
	r.mu.Lock()
	r.escalated = append(r.escalated, m)
	r.mu.Unlock()
	r.delivered <- struct{}{}
}
func (r *recordingInvoker) note(m any) {
	r.mu.Lock()
	r.got = append(r.got, m)
	r.mu.Unlock()
	r.delivered <- struct{}{}
}

func (r *recordingInvoker) wait(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-r.delivered:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d messages delivered", i, n)
		}
	}
}

func newTestMailbox(t *testing.T) (*childMailbox, *recordingInvoker, *warmDispatcher) {
	inv := &recordingInvoker{delivered: make(chan struct{}, 10000)}
	d := newWarmDispatcher(3) // a small throughput exercises the yield
	t.Cleanup(d.close)
	m := newChildMailbox().(*childMailbox)
	m.RegisterHandlers(inv, d)
	return m, inv, d
}

// Every message posted from many goroutines is delivered exactly once, and
// each sender's messages arrive in the order it posted them.
func TestChildMailboxDeliversEachMessageOnceInSenderOrder(t *testing.T) {
	m, inv, _ := newTestMailbox(t)
	const senders, each = 8, 500
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				m.PostUserMessage([2]int{s, i})
			}
		})
	}
	wg.Wait()
	inv.wait(t, senders*each)
	next := make([]int, senders)
	for _, g := range inv.got {
		v := g.([2]int)
		if v[1] != next[v[0]] {
			t.Fatalf("sender %d: got message %d, want %d", v[0], v[1], next[v[0]])
		}
		next[v[0]]++
	}
	if m.UserMessageCount() != 0 {
		t.Fatalf("%d user messages left", m.UserMessageCount())
	}
}

// System messages overtake queued user messages; a suspended mailbox holds
// user messages back until resumed but still handles system messages.
func TestChildMailboxSystemFirstAndSuspension(t *testing.T) {
	m, inv, _ := newTestMailbox(t)
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("user-1")
	m.PostSystemMessage("system-1")
	inv.wait(t, 1)
	select {
	case <-inv.delivered:
		t.Fatalf("a user message was delivered while suspended: %v", inv.got)
	case <-time.After(50 * time.Millisecond):
	}
	m.PostSystemMessage(&actor.ResumeMailbox{})
	inv.wait(t, 1)
	if fmt.Sprint(inv.got) != "[system-1 user-1]" {
		t.Fatalf("delivered %v, want [system-1 user-1]", inv.got)
	}
}

// A panicking handler escalates with the message that caused it, and the
// mailbox goes on with the next message.
func TestChildMailboxEscalatesPanics(t *testing.T) {
	m, inv, _ := newTestMailbox(t)
	inv.panicOn = "bad"
	m.PostUserMessage("bad")
	m.PostUserMessage("good")
	inv.wait(t, 2)
	if fmt.Sprint(inv.escalated) != "[bad]" || fmt.Sprint(inv.got) != "[good]" {
		t.Fatalf("escalated %v delivered %v", inv.escalated, inv.got)
	}
}

// A message posted while the mailbox is going idle is never stranded: the
// processor re-checks after it marks itself idle. Each round posts a user
// and a system message from two goroutines at once and waits for both; a
// mailbox that lost a wakeup leaves a round waiting.
func TestChildMailboxNeverStrandsAMessage(t *testing.T) {
	m, inv, _ := newTestMailbox(t)
	for round := 0; round < 20000; round++ {
		var wg sync.WaitGroup
		wg.Go(func() { m.PostUserMessage(round) })
		wg.Go(func() { m.PostSystemMessage(round) })
		wg.Wait()
		for i := 0; i < 2; i++ {
			select {
			case <-inv.delivered:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: a message was posted and never delivered", round)
			}
		}
	}
}

// Schedule never blocks, even with every goroutine busy; sequential
// schedules reuse parked goroutines rather than start new ones; close lets
// them all exit (TestMain checks for leaks).
func TestWarmDispatcherNeverBlocksAndReuses(t *testing.T) {
	d := newWarmDispatcher(300)
	defer d.close()
	release := make(chan struct{})
	var running sync.WaitGroup
	const busy = 64
	running.Add(busy)
	scheduled := make(chan struct{})
	go func() {
		for i := 0; i < busy; i++ {
			d.Schedule(func() { running.Done(); <-release })
		}
		close(scheduled)
	}()
	select {
	case <-scheduled:
	case <-time.After(5 * time.Second):
		t.Fatal("Schedule blocked while every goroutine was busy")
	}
	running.Wait() // all 64 run at once: none waited for another
	close(release)
	for i := 0; i < 1000; i++ {
		done := make(chan struct{})
		d.Schedule(func() { close(done) })
		<-done
	}
	// The 64 goroutines park after their first run; the 1,000 later runs go
	// to them. A goroutine finishing fn and parking races with the next
	// Schedule, so allow a few extra starts, never hundreds.
	if n := d.started.Load(); n > busy+8 {
		t.Fatalf("%d goroutines started for %d concurrent and 1,000 sequential runs; want about %d", n, busy, busy)
	}
}
