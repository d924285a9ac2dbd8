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

// burst runs n functions at once on d and returns when all have returned
// and their goroutines are parked again.
func burst(t *testing.T, d *warmDispatcher, n int) {
	t.Helper()
	release := make(chan struct{})
	var running, done sync.WaitGroup
	running.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		d.Schedule(func() { running.Done(); <-release; done.Done() })
	}
	running.Wait()
	close(release)
	done.Wait()
	waitUntil(t, "the burst's goroutines to park", func() bool { return d.parked.Load() >= int64(n) })
}

func live(d *warmDispatcher) int64 { return d.started.Load() - d.exited.Load() }

// After a burst, a load of one at a time keeps using every goroutine of the
// set in turn (a channel wakes the one parked longest), so none is ever idle
// for long; the trim still finds the burst's surplus, because all but one
// of them stayed parked throughout the interval.
func TestWarmDispatcherRetiresWhatABurstLeftParked(t *testing.T) {
	d := newTrimmedDispatcher(300, 0)
	defer d.close()
	burst(t, d, 32)
	d.trimIdle() // the interval starts with 32 parked
	for i := 0; i < 100; i++ {
		done := make(chan struct{})
		d.Schedule(func() { close(done) })
		<-done
	}
	if n := d.trimIdle(); n < 30 {
		t.Fatalf("retired %d of the 32 goroutines a load of one left parked; want at least 30", n)
	}
	waitUntil(t, "the retired goroutines to exit", func() bool { return live(d) <= 2 })
	// What is left still serves, and a new burst grows the set again.
	burst(t, d, 8)
	if n := live(d); n < 8 {
		t.Fatalf("%d goroutines after a burst of 8", n)
	}
}

// A load that needs the whole set at some moment of each interval keeps it:
// the trim counts the fewest parked at once, not how many are parked when
// it runs.
func TestWarmDispatcherKeepsWhatTheLoadUses(t *testing.T) {
	d := newTrimmedDispatcher(300, 0)
	defer d.close()
	burst(t, d, 8)
	d.trimIdle() // an interval begins with 8 parked
	for round := 0; round < 5; round++ {
		burst(t, d, 8) // all 8 at once; then all 8 parked again
		if n := d.trimIdle(); n != 0 {
			t.Fatalf("round %d: retired %d goroutines that the load had all used at once", round, n)
		}
	}
	if n := d.started.Load(); n > 8+4 {
		t.Fatalf("%d goroutines started for a load of 8 at once; the set should have been kept", n)
	}
}

// The dispatcher's own timer trims: a burst's goroutines exit within two
// intervals of going idle, with no call from outside.
func TestWarmDispatcherTrimsOnItsTimer(t *testing.T) {
	d := newTrimmedDispatcher(300, 20*time.Millisecond)
	defer d.close()
	burst(t, d, 16)
	waitUntil(t, "the timer to retire the idle goroutines", func() bool { return live(d) == 0 })
}

// The interval after a trim starts from what is parked once the retired
// are gone: goroutines busy when it began are not counted idle in it.
func TestWarmDispatcherCountsNoRetiredGoroutineAsParked(t *testing.T) {
	d := newTrimmedDispatcher(300, 0)
	defer d.close()
	burst(t, d, 40)
	d.trimIdle() // an interval begins with 40 parked
	release := make(chan struct{})
	var running, done sync.WaitGroup
	running.Add(8)
	done.Add(8)
	for i := 0; i < 8; i++ {
		d.Schedule(func() { running.Done(); <-release; done.Done() })
	}
	running.Wait()
	// A goroutine counted parked may not be waiting in its select yet, and
	// a retire is never waited for: allow a straggler or two.
	retired := d.trimIdle()
	if retired < 30 || retired > 32 {
		t.Fatalf("retired %d of the 32 parked throughout; want 32, or nearly", retired)
	}
	waitUntil(t, "the retired to exit", func() bool { return live(d) == int64(40-retired) })
	// The next interval begins with the 8 busy and the stragglers parked:
	// only the stragglers were parked throughout it.
	close(release)
	done.Wait()
	waitUntil(t, "the 8 to park", func() bool { return d.parked.Load() == int64(40-retired) })
	if n, stragglers := d.trimIdle(), 32-retired; n > stragglers {
		t.Fatalf("retired %d goroutines; only %d were parked when the interval began, the 8 others busy", n, stragglers)
	}
}

// Nearly every Schedule comes from inside a mailbox run (a child answering
// its parent, the parent spawning a child): the sender is still running
// when it hands off, so two goroutines are in use at once and both are kept.
func TestWarmDispatcherKeepsTheSetOfHandOffsFromInside(t *testing.T) {
	d := newTrimmedDispatcher(300, 0)
	defer d.close()
	const steps = 1000
	n := 0
	finished := make(chan struct{})
	var step func()
	step = func() {
		n++
		if n == 2 {
			d.trimIdle() // the interval begins once the set is two
		}
		if n == steps {
			close(finished)
			return
		}
		d.Schedule(step)
	}
	d.Schedule(step)
	<-finished
	waitUntil(t, "the set to park", func() bool { return d.parked.Load() == live(d) })
	if r := d.trimIdle(); r != 0 {
		t.Fatalf("a load of two at once (each sender inside its run) lost %d of its %d goroutines", r, d.started.Load())
	}
}
